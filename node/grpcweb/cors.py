"""CORS for the gRPC-web endpoint: which browser origins may call, and the headers that say so.

Rules (docs/grpc-web.md):
- An origin is allowed when it equals a configured origin exactly; `*` allows every origin, but only when it
  is configured. The answer names the origin itself (or `*` when only the wildcard matched), with
  `Vary: Origin` so caches keep answers per origin.
- A preflight (`OPTIONS` with `Origin`) from an allowed origin asking for `POST` gets 204 with the allowed
  methods, request headers and max age; anything else gets a bare 403.
- A request without `Origin` is not a cross-origin browser request: it is served with no CORS headers.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from aiohttp import web

# Request headers a gRPC-web browser client sends (connect-web and grpc-web both stay within these).
ALLOWED_REQUEST_HEADERS = ("content-type", "x-grpc-web", "x-user-agent", "grpc-timeout", "authorization")
# Response headers browser code must be able to read to see a status.
EXPOSED_RESPONSE_HEADERS = ("grpc-status", "grpc-message", "grpc-status-details-bin")
ALLOWED_METHODS = "POST, OPTIONS"


@dataclass(frozen=True)
class CorsPolicy:
    origins: frozenset[str]
    max_age: int = 600
    extra_request_headers: tuple[str, ...] = ()

    @classmethod
    def build(cls, origins: Sequence[str], *, max_age: int, extra_request_headers: Sequence[str]) -> CorsPolicy:
        return cls(frozenset(origins), max_age, tuple(h.lower() for h in extra_request_headers))

    @property
    def allowed_request_headers(self) -> tuple[str, ...]:
        extra = tuple(h for h in self.extra_request_headers if h not in ALLOWED_REQUEST_HEADERS)
        return ALLOWED_REQUEST_HEADERS + extra

    def allow_origin(self, origin: str) -> str | None:
        """The `Access-Control-Allow-Origin` value for `origin`, or None when it is not allowed."""
        if origin in self.origins:
            return origin
        if "*" in self.origins:
            return "*"
        return None

    def preflight(self, request: web.Request) -> web.Response:
        origin = request.headers.get("Origin")
        if origin is None:
            # Not a CORS preflight: an ordinary OPTIONS request asking what the resource supports.
            return web.Response(status=204, headers={"Allow": ALLOWED_METHODS})
        allowed = self.allow_origin(origin)
        requested_method = request.headers.get("Access-Control-Request-Method", "POST")
        if allowed is None or requested_method.upper() != "POST":
            return web.Response(status=403, text="cross-origin request refused\n")
        return web.Response(
            status=204,
            headers={
                "Access-Control-Allow-Origin": allowed,
                "Access-Control-Allow-Methods": ALLOWED_METHODS,
                "Access-Control-Allow-Headers": ", ".join(self.allowed_request_headers),
                "Access-Control-Max-Age": str(self.max_age),
                "Vary": "Origin",
            },
        )

    def response_headers(self, allowed_origin: str, metadata_keys: Iterable[str] = ()) -> dict[str, str]:
        """CORS headers for an actual response; the response's metadata names are exposed too."""
        exposed = list(EXPOSED_RESPONSE_HEADERS)
        exposed += [key for key in dict.fromkeys(metadata_keys) if key not in exposed]
        return {
            "Access-Control-Allow-Origin": allowed_origin,
            "Access-Control-Expose-Headers": ", ".join(exposed),
            "Vary": "Origin",
        }
