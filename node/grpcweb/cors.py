"""The one CORS rule of every browser-facing listener: the node's gRPC-web endpoint and the gateway.

    cors = CorsPolicy.build(origins, methods=("POST",))          # the node's gRPC-web listener
    cors = CorsPolicy.build(origins, methods=("GET", "POST"))    # the gateway (REST, SSE, gRPC-web)
    allowed = cors.preflight_origin(origin, requested_method)    # None: refuse the preflight
    headers = cors.preflight_headers(allowed)                    # the 204's CORS headers
    headers = cors.response_headers(allowed, metadata_keys)      # an actual answer's CORS headers

Rules (docs/grpc-web.md, docs/rest.md):
- An origin is allowed when it equals a configured origin exactly; `*` allows every origin, but only when it
  is configured. The answer names the origin itself (or `*` when only the wildcard matched), with
  `Vary: Origin` so caches keep answers per origin.
- A preflight from an allowed origin asking for one of the listener's methods is allowed; its answer names
  the methods (plus OPTIONS), the request headers of `ALLOWED_REQUEST_HEADERS` (plus any configured extra
  ones) and the max age. Each listener writes its own refusal (the node a bare 403, the gateway a 403 with
  its JSON error body).
- Actual answers to an allowed origin expose `EXPOSED_RESPONSE_HEADERS` and the names of the answer's own
  metadata headers, so browser code can read a status and its reason code.
- A request without `Origin` is not a cross-origin browser request: it gets no CORS headers.

Both listeners use the same header lists: the union of what a gRPC-web client sends (`x-grpc-web`,
`x-user-agent`, `grpc-timeout`), what an SSE client resuming a stream sends (`last-event-id`), what a
consistent read asks (`chain-min-height`, `chain-read-consistency`), the gateway's JSON error details
(`reason-code`, `reason-values`, `field`) and the height a read reflects (`chain-height`). Only the
methods differ, because only the gateway serves GET.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from node.errors import CHAIN_HEIGHT, CHAIN_MIN_HEIGHT, CHAIN_READ_CONSISTENCY, FIELD, REASON_CODE, REASON_VALUES

# Request headers browsers may send: gRPC-web clients (connect-web and grpc-web both stay within these),
# SSE clients resuming a stream, and bearer tokens.
ALLOWED_REQUEST_HEADERS = (
    "content-type",
    "last-event-id",
    "x-grpc-web",
    "x-user-agent",
    "grpc-timeout",
    "authorization",
    CHAIN_MIN_HEIGHT,
    CHAIN_READ_CONSISTENCY,
)
# Response headers browser code must be able to read: the gRPC status, and the reason code and its
# details, sent as trailers-only metadata by gRPC-web and as headers by the gateway's errors.
EXPOSED_RESPONSE_HEADERS = (
    "grpc-status",
    "grpc-message",
    "grpc-status-details-bin",
    REASON_CODE,
    REASON_VALUES,
    FIELD,
    CHAIN_HEIGHT,
)
DEFAULT_MAX_AGE = 600


@dataclass(frozen=True)
class CorsPolicy:
    origins: frozenset[str]
    methods: tuple[str, ...] = ("POST",)  # what a preflight may ask for (OPTIONS is always answered)
    max_age: int = DEFAULT_MAX_AGE
    extra_request_headers: tuple[str, ...] = ()

    @classmethod
    def build(
        cls,
        origins: Sequence[str],
        *,
        methods: Sequence[str] = ("POST",),
        max_age: int = DEFAULT_MAX_AGE,
        extra_request_headers: Sequence[str] = (),
    ) -> CorsPolicy:
        return cls(
            frozenset(origins),
            tuple(m.upper() for m in methods),
            max_age,
            tuple(h.lower() for h in extra_request_headers),
        )

    @property
    def allowed_methods(self) -> str:
        return ", ".join((*self.methods, "OPTIONS"))

    @property
    def allowed_request_headers(self) -> tuple[str, ...]:
        extra = tuple(h for h in self.extra_request_headers if h not in ALLOWED_REQUEST_HEADERS)
        return ALLOWED_REQUEST_HEADERS + extra

    def allow_origin(self, origin: str | None) -> str | None:
        """The `Access-Control-Allow-Origin` value for `origin`, or None when it is not allowed (or absent)."""
        if not origin:
            return None
        if origin in self.origins:
            return origin
        if "*" in self.origins:
            return "*"
        return None

    def preflight_origin(self, origin: str | None, requested_method: str) -> str | None:
        """The `Access-Control-Allow-Origin` value when this preflight is allowed, else None."""
        allowed = self.allow_origin(origin)
        if allowed is None or requested_method.upper() not in self.methods:
            return None
        return allowed

    def preflight_headers(self, allowed_origin: str) -> dict[str, str]:
        """CORS headers of the 204 answering an allowed preflight."""
        return {
            "Access-Control-Allow-Origin": allowed_origin,
            "Access-Control-Allow-Methods": self.allowed_methods,
            "Access-Control-Allow-Headers": ", ".join(self.allowed_request_headers),
            "Access-Control-Max-Age": str(self.max_age),
            "Vary": "Origin",
        }

    def response_headers(self, allowed_origin: str, metadata_keys: Iterable[str] = ()) -> dict[str, str]:
        """CORS headers for an actual response; the response's metadata names are exposed too."""
        exposed = list(EXPOSED_RESPONSE_HEADERS)
        exposed += [key for key in dict.fromkeys(metadata_keys) if key not in exposed]
        return {
            "Access-Control-Allow-Origin": allowed_origin,
            "Access-Control-Expose-Headers": ", ".join(exposed),
            "Vary": "Origin",
        }


def vary_with_origin(vary: str | None) -> str:
    """A `Vary` value that names Origin, keeping what `vary` already names."""
    if not vary:
        return "Origin"
    if "origin" in (part.strip().lower() for part in vary.split(",")):
        return vary
    return vary + ", Origin"
