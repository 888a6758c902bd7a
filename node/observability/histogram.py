"""A per-request histogram that costs a bucket search and two additions, exposed in Prometheus text exactly
as the OpenTelemetry exporter exposes its own histograms.

    duration = endpoint.histogram("rpc.server.duration", "ms", "Duration of ...", MS_BUCKETS)
    duration.record(0.42, {"rpc.method": "GetAccount", "rpc.grpc.status_code": 0})
    duration.record_all([0.42, 0.5], key)            # several amounts under one series key (a read worker's)
    duration.merge(attributes, counts, total)        # another process's series (node/server/readers/shipping.py)
    duration.take()                                  # [[attributes, counts, sum], ...] and forget them

Why not an OpenTelemetry histogram: the SDK's `Histogram.record` cleans and hashes the attributes and
builds a measurement object on every call, ~9.5 µs, about 7% of a gateway GET and of a node read
(docs/observability.md, "Metrics"). The two instruments recorded once per request
(`rpc.server.duration`, `http.server.request.duration`) and the one recorded per committed message
(`chain.message.commit.duration`) use this class; everything else stays an
OpenTelemetry instrument. The exposition is the same: the name sanitised and suffixed with the unit, labels
sanitised ('.' → '_') and sorted, `le` written as the bound is written in the bucket list, buckets
cumulative and upper-inclusive, no family at all before the first record (tests/node/observability/
test_histogram.py compares the two texts).

Series are kept under the attributes as given (one dict lookup); series whose attributes only differ in
order are added together when scraped. `record` and the scrape (prometheus_client's HTTP thread) share a
lock.
"""

from __future__ import annotations

import json
import re
import threading
from bisect import bisect_left
from collections.abc import Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import Any

from prometheus_client.core import HistogramMetricFamily

Attributes = Mapping[str, str | int]
Key = tuple[tuple[str, str | int], ...]
Series = list[list[Any]]  # [[attributes, [count per bucket, ..., count above the last], sum], ...]

UNITS: Mapping[str, str] = MappingProxyType({"ms": "milliseconds", "s": "seconds", "": ""})
_NAME = re.compile(r"[^a-zA-Z0-9:]+")
_LABEL = re.compile(r"[^a-zA-Z0-9]+")


def series_key(attributes: Attributes) -> Key:
    """The key a series is kept under: the attributes' pairs, in the order given."""
    return tuple(attributes.items())


def _label_value(value: str | int) -> str:
    return value if isinstance(value, str) else json.dumps(value)


class Histogram:
    def __init__(self, name: str, unit: str, description: str, buckets: Sequence[float]) -> None:
        if unit not in UNITS:
            raise ValueError(f"unit {unit!r}: one of {sorted(UNITS)}")
        if list(buckets) != sorted(set(buckets)):
            raise ValueError("buckets must be strictly increasing")
        self.name = _NAME.sub("_", name)
        self.unit = UNITS[unit]
        self.description = description
        self.bounds = tuple(buckets)
        self._series: dict[Key, list[float]] = {}  # key -> [count per bucket ..., overflow count, sum]
        self._lock = threading.Lock()

    def record(self, amount: float, attributes: Attributes | None = None) -> None:
        self.record_key(amount, series_key(attributes) if attributes else ())

    def record_key(self, amount: float, key: Key) -> None:
        """`record` with the attributes given as their `series_key`, which a caller recording the same few
        attribute sets on every request makes once and keeps."""
        index = bisect_left(self.bounds, amount)
        with self._lock:
            series = self._series_of(key)
            series[index] += 1
            series[-1] += amount

    def record_all(self, amounts: Sequence[float], key: Key) -> None:
        """`record_key` for each of `amounts` in turn, under one hold of the lock (a read worker's durations
        of the last second, node/server/readers/shipping.py)."""
        bounds = self.bounds
        with self._lock:
            series = self._series_of(key)
            for amount in amounts:
                series[bisect_left(bounds, amount)] += 1
                series[-1] += amount

    def merge(self, attributes: Attributes, counts: Sequence[int], total: float) -> bool:
        """Add a series recorded elsewhere with the same buckets; False (nothing added) when its shape differs."""
        if len(counts) != len(self.bounds) + 1:
            return False
        key = series_key(attributes)
        with self._lock:
            series = self._series_of(key)
            for index, count in enumerate(counts):
                series[index] += count
            series[-1] += total
        return True

    def _series_of(self, key: Key) -> list[float]:
        """The series under `key`, made empty the first time (the caller holds the lock)."""
        series = self._series.get(key)
        if series is None:
            series = self._series[key] = [0.0] * (len(self.bounds) + 2)
        return series

    def take(self) -> Series:
        """Every series recorded since the last `take`, and forget them (a read worker ships these)."""
        with self._lock:
            taken, self._series = self._series, {}
        return [[dict(key), [int(c) for c in series[:-1]], series[-1]] for key, series in taken.items()]

    # ---- the prometheus_client collector protocol ----
    def describe(self) -> Iterator[HistogramMetricFamily]:
        yield HistogramMetricFamily(self.name, self.description, unit=self.unit, labels=[])

    def collect(self) -> Iterator[HistogramMetricFamily]:
        with self._lock:
            snapshot = [(key, list(series)) for key, series in self._series.items()]
        if not snapshot:
            return
        merged: dict[tuple[tuple[str, str], ...], list[float]] = {}
        for key, series in snapshot:
            labels = tuple(sorted((_LABEL.sub("_", k), _label_value(v)) for k, v in key))
            into = merged.get(labels)
            if into is None:
                merged[labels] = series
            else:
                for index, value in enumerate(series):
                    into[index] += value
        names = sorted({name for labels in merged for name, _ in labels})
        family = HistogramMetricFamily(self.name, self.description, unit=self.unit, labels=names)
        edges = [str(bound) for bound in self.bounds] + ["+Inf"]
        for labels, series in merged.items():
            values = dict(labels)
            cumulative: list[tuple[str, float]] = []
            running = 0.0
            for edge, count in zip(edges, series[:-1], strict=True):
                running += count
                cumulative.append((edge, running))
            family.add_metric([values.get(name, "") for name in names], cumulative, series[-1])
        yield family
