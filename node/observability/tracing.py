"""The process's tracing: an OpenTelemetry tracer provider, its exporter and the instrumentations.

    tracing = Tracing.from_env("chain-node")   # on only when OTEL_EXPORTER_OTLP_ENDPOINT is set
    tracing.start()                           # before the servers, channels and apps are created
    NodeApp(config, tracer_provider=tracing.provider)
    ...
    tracing.stop()                            # flushes the exporter, removes the instrumentation

Off (the default) means nothing at all: no provider, no instrumentation installed (grpc.aio.server,
grpc.aio.insecure_channel, aiohttp's Application and redis stay the library's own), no exporter thread;
the node's own spans are skipped behind one `is None` check.

On, the maintained instrumentations are installed with this provider (never the global one, so two
Tracing objects in one test process do not interfere; only one may be started at a time since the
instrumentors patch the libraries):
- grpc.aio server and client (health checks and reflection excluded), so a gateway call and the node's
  handling of it are one trace (W3C traceparent in the gRPC metadata);
- aiohttp server: a SERVER span per HTTP request (REST, SSE, the node's gRPC-web listener);
- redis: a CLIENT span per command.
Background loops with no request behind them (event feeds, relays, XREAD polling) would each start a
trace of their own every few milliseconds; the sampler drops such client-side roots (see `RequestRoots`).
`OTEL_TRACES_SAMPLER_ARG` (a ratio in [0, 1], default 1) samples that share of the root traces kept.

Where spans go (`OTLPTarget`, from the standard variables, each `OTEL_EXPORTER_OTLP_TRACES_*` one first):
an `https://` endpoint is OTLP/gRPC over TLS, trusting `OTEL_EXPORTER_OTLP_CERTIFICATE` (a CA bundle; the
system's roots without one) and, with `OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE` and `_CLIENT_KEY`, presenting
that client certificate; an `http://` endpoint is plaintext; a bare `host:port` is TLS unless
`OTEL_EXPORTER_OTLP_INSECURE` is `true`. The files are read when the settings are read: a missing or
unreadable one is a one-line `TLSFileError` naming the variable, not spans silently sent elsewhere.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opentelemetry.context import Context
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor, SpanExporter
from opentelemetry.sdk.trace.sampling import (
    ALWAYS_ON,
    Decision,
    ParentBased,
    Sampler,
    SamplingResult,
    TraceIdRatioBased,
)
from opentelemetry.trace import Link, SpanKind
from opentelemetry.util.types import Attributes

from node.tls import ClientTLS, parse_target

log = logging.getLogger("chain.telemetry")

ENDPOINT_VARS = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
DEFAULT_ENDPOINT = "http://localhost:4317"  # the OTLP/gRPC default


def _setting(env: Mapping[str, str], name: str) -> tuple[str, str]:
    """(the variable that holds it, its value) for OTEL_EXPORTER_OTLP_<name>, the traces-only one first."""
    for var in (f"OTEL_EXPORTER_OTLP_TRACES_{name}", f"OTEL_EXPORTER_OTLP_{name}"):
        value = env.get(var, "").strip()
        if value:
            return var, value
    return f"OTEL_EXPORTER_OTLP_{name}", ""


@dataclass(frozen=True)
class OTLPTarget:
    """The OTLP/gRPC collector spans are exported to: its endpoint, and TLS (None: plaintext)."""

    endpoint: str
    tls: ClientTLS | None

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> OTLPTarget:
        """From the OTEL_EXPORTER_OTLP_* variables; the certificate files are read now (TLSFileError)."""
        endpoint = _setting(env, "ENDPOINT")[1] or DEFAULT_ENDPOINT
        insecure = _setting(env, "INSECURE")[1].lower() == "true"
        try:
            secure = parse_target(endpoint, secure=not insecure).secure  # https:// TLS, http:// plaintext
        except ValueError as err:
            raise ValueError(f"OTEL_EXPORTER_OTLP_ENDPOINT: {err}") from None
        if not secure:
            return cls(endpoint, None)
        (ca_var, ca), (cert_var, cert), (key_var, key) = (
            _setting(env, name) for name in ("CERTIFICATE", "CLIENT_CERTIFICATE", "CLIENT_KEY")
        )
        tls = ClientTLS(
            Path(ca) if ca else None,
            Path(cert) if cert else None,
            Path(key) if key else None,
            flags=(ca_var, cert_var, key_var),
        )
        tls.check()
        return cls(endpoint, tls)

    def exporter(self) -> SpanExporter:
        # lazy on purpose: the OTLP exporter is loaded only when tracing is on (pyproject per-file-ignores)
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        if self.tls is None:
            return OTLPSpanExporter(endpoint=self.endpoint, insecure=True)
        # the target's scheme stays in `endpoint`: the exporter takes host:port from it
        return OTLPSpanExporter(endpoint=self.endpoint, insecure=False, credentials=self.tls.credentials())

    def describe(self) -> str:
        if self.tls is None:
            return f"{self.endpoint} (plaintext)"
        client = f", client certificate {self.tls.cert_file}" if self.tls.cert_file else ""
        return f"{self.endpoint} over TLS ({self.tls.describe()}{client})"


class RequestRoots(Sampler):
    """Root spans: kept when they start from an incoming request or an internal job (a block), dropped for
    CLIENT/PRODUCER spans with no parent, i.e. calls made by background loops; children follow the parent."""

    def __init__(self, root: Sampler = ALWAYS_ON) -> None:
        self._root = root

    def should_sample(
        self,
        parent_context: Context | None,
        trace_id: int,
        name: str,
        kind: SpanKind | None = None,
        attributes: Attributes = None,
        links: Sequence[Link] | None = None,
        trace_state: Any = None,
    ) -> SamplingResult:
        if kind in (SpanKind.CLIENT, SpanKind.PRODUCER):
            return SamplingResult(Decision.DROP)
        return self._root.should_sample(parent_context, trace_id, name, kind, attributes, links, trace_state)

    def get_description(self) -> str:
        return f"RequestRoots{{{self._root.get_description()}}}"


class Tracing:
    def __init__(
        self,
        service_name: str,
        *,
        exporter: SpanExporter | None = None,
        batch: bool = True,
        enabled: bool | None = None,
        ratio: float = 1.0,
        otlp: OTLPTarget | None = None,
    ) -> None:
        """`exporter`: where spans go (default: OTLP over gRPC to `otlp`, or as the OTEL_EXPORTER_OTLP_*
        variables say). `batch`: a BatchSpanProcessor (a background thread); False exports each span as it
        ends (tests). `enabled`: default on when an exporter is given."""
        self.service_name = service_name
        self.exporter = exporter
        self.otlp = otlp
        self.batch = batch
        self.enabled = exporter is not None if enabled is None else enabled
        if not 0.0 <= ratio <= 1.0:
            raise ValueError(f"the sampling ratio is in [0, 1], not {ratio}")
        self.ratio = ratio
        self.provider: TracerProvider | None = None
        self._instrumentors: list[Any] = []

    @classmethod
    def from_env(cls, service_name: str, env: Mapping[str, str] | None = None) -> Tracing:
        """On when OTEL_EXPORTER_OTLP_ENDPOINT (or ..._TRACES_ENDPOINT) is set and OTEL_SDK_DISABLED is not true."""
        env = os.environ if env is None else env
        wanted = any(env.get(name, "").strip() for name in ENDPOINT_VARS)
        disabled = env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true"
        raw = env.get("OTEL_TRACES_SAMPLER_ARG", "").strip() or "1"
        try:
            ratio = float(raw)
        except ValueError:
            raise ValueError(f"OTEL_TRACES_SAMPLER_ARG is a ratio in [0, 1], not {raw!r}") from None
        enabled = wanted and not disabled
        otlp = OTLPTarget.from_env(env) if enabled else None  # a bad certificate file stops the start here
        return cls(service_name, enabled=enabled, ratio=ratio, otlp=otlp)

    def start(self) -> None:
        if not self.enabled or self.provider is not None:
            return
        exporter = self.exporter
        where = type(exporter).__name__
        if exporter is None:
            otlp = self.otlp or OTLPTarget.from_env(os.environ)
            exporter, where = otlp.exporter(), f"OTLP to {otlp.describe()}"
        attributes = {} if os.environ.get("OTEL_SERVICE_NAME") else {SERVICE_NAME: self.service_name}
        root = RequestRoots(ALWAYS_ON if self.ratio >= 1.0 else TraceIdRatioBased(self.ratio))
        provider = TracerProvider(resource=Resource.create(attributes), sampler=ParentBased(root))
        processor: SpanProcessor = BatchSpanProcessor(exporter) if self.batch else SimpleSpanProcessor(exporter)
        provider.add_span_processor(processor)
        self.provider = provider
        self._instrument(provider)
        log.info("tracing on: spans of %s to %s", self.service_name, where)

    def _instrument(self, provider: TracerProvider) -> None:
        # lazy on purpose: about a second of imports, paid only when tracing is on (pyproject per-file-ignores)
        from opentelemetry.instrumentation.aiohttp_server import AioHttpServerInstrumentor
        from opentelemetry.instrumentation.grpc import GrpcAioInstrumentorClient, GrpcAioInstrumentorServer, filters
        from opentelemetry.instrumentation.redis import RedisInstrumentor

        wanted = filters.negate(filters.any_of(filters.health_check(), filters.service_prefix("grpc.reflection")))
        self._instrumentors = [
            GrpcAioInstrumentorServer(filter_=wanted),  # type: ignore[no-untyped-call]
            GrpcAioInstrumentorClient(filter_=wanted),  # type: ignore[no-untyped-call]
            AioHttpServerInstrumentor(),
            RedisInstrumentor(),
        ]
        for instrumentor in self._instrumentors:
            if instrumentor.is_instrumented_by_opentelemetry:
                raise RuntimeError(f"{type(instrumentor).__name__} is installed already: one Tracing per process")
            instrumentor.instrument(tracer_provider=provider)

    def stop(self) -> None:
        for instrumentor in reversed(self._instrumentors):
            instrumentor.uninstrument()
        self._instrumentors = []
        if self.provider is not None:
            self.provider.shutdown()  # flushes what the processor still holds
            self.provider = None
