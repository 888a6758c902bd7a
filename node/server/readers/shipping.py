"""RPC durations from a read worker to the main process's metrics, in batches.

    shipper = RpcShipper(local_paths())       # the worker's RpcMetricsInterceptor records into it
    series = shipper.take()                   # [[attributes, [ms, ...]], ...]: one JSON line a second
    replay(series, metrics)                   # in the main process: into its own rpc.server.duration

Only the calls the worker answered itself are kept: a relayed call is recorded by the main process, which
serves it, so no call is counted twice. The main process records each duration into the same histogram
with the same attributes, so Prometheus sees one `rpc_server_duration_milliseconds` for the whole node
(aggregated in the main process, not prometheus_client's multiprocess mode: the node's metrics are
OpenTelemetry instruments, which that mode does not cover).
"""

from __future__ import annotations

from typing import Any

from node.server.telemetry.rpc import Attributes, RpcRecorder

Series = list[list[Any]]
SeriesKey = tuple[tuple[str, str | int], ...]


class RpcShipper:
    def __init__(self, local: frozenset[str]) -> None:
        self._local = local
        self._pending: dict[SeriesKey, list[float]] = {}

    @property
    def rpc_duration(self) -> RpcShipper:
        return self

    def record(self, amount: float, attributes: Attributes | None = None) -> None:
        attrs = dict(attributes or {})
        if f"/{attrs.get('rpc.service')}/{attrs.get('rpc.method')}" not in self._local:
            return  # relayed: the main process records it
        self.add(series_key(attrs), amount)

    def add(self, key: SeriesKey, amount: float) -> None:
        """One duration under attributes already made a key (`series_key`): what a worker's own calls use,
        the key of a successful call computed once per method (node/server/readers/served.py)."""
        durations = self._pending.get(key)
        if durations is None:
            durations = self._pending[key] = []
        durations.append(round(amount, 4))

    def take(self) -> Series:
        """What was recorded since the last call, and forget it."""
        pending, self._pending = self._pending, {}
        return [[dict(attrs), durations] for attrs, durations in pending.items()]


def series_key(attributes: Attributes) -> SeriesKey:
    return tuple(sorted(attributes.items()))


def replay(series: Series, metrics: RpcRecorder) -> int:
    """Record a worker's batch; the number of calls in it. Malformed entries are skipped."""
    count = 0
    for entry in series:
        if not (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], dict)):
            continue
        attrs = {str(k): v for k, v in entry[0].items() if isinstance(v, str | int)}
        for amount in entry[1] if isinstance(entry[1], list) else ():
            if isinstance(amount, int | float):
                metrics.rpc_duration.record(float(amount), attrs)
                count += 1
    return count
