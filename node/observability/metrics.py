"""A Prometheus endpoint over OpenTelemetry metrics, owned by one object.

    endpoint = MetricsEndpoint("chain-node", "localhost:9464")   # '' : metrics off (a no-op meter)
    port = endpoint.start()                                       # the bound port (address port 0 works)
    meter = endpoint.meter                                        # instruments are created from this
    duration = endpoint.histogram(name, unit, description, buckets)   # a per-request histogram (histogram.py)
    endpoint.stop()

The meter provider is not the global one and the Prometheus reader has its own registry, so a node and
a gateway in one process (the tests) each serve only their own metrics. The exposition is served by
prometheus_client's small threaded HTTP server on `addr` (GET any path), out of the event loop.
Names follow the OpenTelemetry conventions; the exporter turns `rpc.server.duration` with unit `ms` into
`rpc_server_duration_milliseconds` and adds `_total` to counters. The histograms recorded once per request
are node.observability.histogram's, registered in the same registry and exposed the same way.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.metrics import Meter, NoOpMeterProvider, Observation
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from prometheus_client import CollectorRegistry, start_http_server

from node.listen import ListenError
from node.observability.address import split_addr
from node.observability.histogram import Histogram


class MetricsAddressError(ListenError):
    """The metrics listener cannot bind its address (taken, not local, ...)."""


class MetricsEndpoint:
    def __init__(self, service_name: str, addr: str) -> None:
        self.service_name = service_name
        self.addr = addr
        self.port = 0
        self.registry = CollectorRegistry(auto_describe=True)
        self._provider: MeterProvider | None = None
        self._reader: PrometheusMetricReader | None = None
        self._server: Any = None
        self._thread: threading.Thread | None = None
        if addr:
            split_addr(addr)  # a malformed address fails now, not after the node has opened its store
            self._reader = PrometheusMetricReader(registry=self.registry, scope_info_enabled=False)
            resource = Resource.create({SERVICE_NAME: service_name})
            self._provider = MeterProvider(resource=resource, metric_readers=[self._reader])
            self.meter: Meter = self._provider.get_meter("chain")
        else:
            self.meter = NoOpMeterProvider().get_meter("chain")

    @property
    def enabled(self) -> bool:
        return self._provider is not None

    def histogram(self, name: str, unit: str, description: str, buckets: Sequence[float]) -> Histogram:
        """A per-request histogram served at this endpoint (kept but not served when metrics are off)."""
        histogram = Histogram(name, unit, description, buckets)
        if self.enabled:
            self.registry.register(histogram)
        return histogram

    def start(self) -> int:
        if self._provider is None or self._server is not None:
            return self.port
        host, port = split_addr(self.addr)
        try:
            self._server, self._thread = start_http_server(port, addr=host, registry=self.registry)
        except OSError as err:
            raise MetricsAddressError("--metrics-addr", self.addr, err.strerror or str(err)) from err
        self.port = int(self._server.server_port)
        return self.port

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(5)
            self._thread = None
        if self._provider is not None:
            self._provider.shutdown()  # also unregisters the reader's collector
            self._provider = None


def memo_lookups(hits: int, misses: int, attributes: Mapping[str, str] | None = None) -> list[Observation]:
    """A memo's lookups as a counter's two series, `chain.memo.result` hit and miss, beside `attributes`
    (the gateway's REST bodies, gateway/telemetry.py; the read workers' answers, node_metrics.py)."""
    base = dict(attributes or {})
    return [
        Observation(hits, {**base, "chain.memo.result": "hit"}),
        Observation(misses, {**base, "chain.memo.result": "miss"}),
    ]
