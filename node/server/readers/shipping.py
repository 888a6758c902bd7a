"""RPC durations from a read worker to the main process's metrics, as histogram series once a second.

    shipper = RpcShipper(local_paths())       # the worker's served.py wrappers record into it
    ok = shipper.durations(attributes)        # a list: one successful call's duration (ms) appended per call
    series = shipper.take()                   # [[attributes, [count per bucket...], sum], ...]: one JSON line
    replay(series, durations)                 # in the main process: added to its rpc.server.duration

Only the calls the worker answered itself are kept: a relayed call is recorded by the main process, which
serves it, so no call is counted twice. The worker buckets its durations with the main process's buckets
(MS_BUCKETS) and ships the counts and sums since the last line; the main process adds them to its own
histogram under the same attributes, so Prometheus sees one `rpc_server_duration_milliseconds` for the whole
node (aggregated in the main process, not prometheus_client's multiprocess mode) and the main process's
work per shipped line is a few additions per series, whatever the number of calls.

A successful local read (most calls) only appends its duration to its method's list (`durations`), and `take`
buckets the lists once a second: a histogram record per call cost ~11k instructions (the attribute pairs made
a key and hashed, the lock, the bucket search), a tenth of a GetAccount read. The lists are appended to and
taken on the worker's event loop thread.
"""

from __future__ import annotations

from typing import Any

from node.observability.histogram import Attributes, Histogram, Key, Series, series_key
from node.server.telemetry.node_metrics import MS_BUCKETS


class RpcShipper:
    def __init__(self, local: frozenset[str]) -> None:
        self._local = local
        self._histogram = Histogram("rpc.server.duration", "ms", "shipped to the main process", MS_BUCKETS)
        self._pending: list[tuple[Key, list[float]]] = []  # (series key, durations since the last take)

    def record(self, amount: float, attributes: Attributes | None = None) -> None:
        attrs = attributes or {}
        if f"/{attrs.get('rpc.service')}/{attrs.get('rpc.method')}" not in self._local:
            return  # relayed: the main process records it
        self._histogram.record(amount, attrs)

    def durations(self, attributes: Attributes) -> list[float]:
        """A list for the durations of the calls this worker answers under `attributes` (served.py appends one
        per successful call; no check of the path): `take` buckets and empties it."""
        durations: list[float] = []
        self._pending.append((series_key(attributes), durations))
        return durations

    def take(self) -> Series:
        """What was recorded since the last call, and forget it."""
        for key, durations in self._pending:
            if durations:
                self._histogram.record_all(durations, key)
                durations.clear()
        return self._histogram.take()


def replay(series: Series, durations: Histogram) -> int:
    """Add a worker's batch to the main process's histogram; the number of calls in it. Malformed entries
    are skipped."""
    count = 0
    for entry in series:
        if not _well_formed(entry):
            continue
        attrs = {str(k): v for k, v in entry[0].items() if isinstance(v, str | int)}
        if durations.merge(attrs, entry[1], float(entry[2])):
            count += sum(entry[1])
    return count


def _well_formed(entry: Any) -> bool:
    return (
        isinstance(entry, list)
        and len(entry) == 3
        and isinstance(entry[0], dict)
        and isinstance(entry[1], list)
        and all(isinstance(c, int) and c >= 0 for c in entry[1])
        and isinstance(entry[2], int | float)
    )
