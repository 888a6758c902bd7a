"""The lean per-request histogram against the OpenTelemetry histogram it replaced: the same records give the
same Prometheus text, over a real scrape of the endpoint's HTTP server."""

from __future__ import annotations

import json
import threading
import urllib.request
from collections.abc import Sequence

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from node.observability.histogram import Attributes, Histogram, series_key
from node.observability.metrics import MetricsEndpoint
from node.server.readers.shipping import RpcShipper, replay
from node.server.telemetry.node_metrics import MS_BUCKETS, SECONDS_BUCKETS, NodeMetrics

ATTRS: list[Attributes] = [
    {"rpc.system": "grpc", "rpc.method": "GetAccount", "rpc.grpc.status_code": 0, "chain.reason_code": ""},
    {"rpc.system": "grpc", "rpc.method": "Submit", "rpc.grpc.status_code": 3, "chain.reason_code": "BAD_SIGNATURE"},
    {"http.request.method": "GET", "http.route": "/v1/accounts/{address}", "http.response.status_code": 200},
]
Records = Sequence[tuple[float, Attributes]]
# on a bound (upper-inclusive), between bounds, below the first, above the last, zero
AMOUNTS = [0.0, 0.1, 0.1000001, 0.3, 1, 1.0, 2.5, 7.25, 9999.0, 10000, 10000.5, 123456.0]


def family(text: str, name: str) -> list[str]:
    """The lines of one metric family (HELP, TYPE and samples), in order."""
    return [line for line in text.splitlines() if name in line]


def otel_text(name: str, unit: str, description: str, buckets: tuple[float, ...], records: Records) -> str:
    endpoint = MetricsEndpoint("chain-test", "127.0.0.1:0")
    try:
        histogram = endpoint.meter.create_histogram(
            name, unit=unit, description=description, explicit_bucket_boundaries_advisory=buckets
        )
        for amount, attrs in records:
            histogram.record(amount, attrs)
        return generate_latest(endpoint.registry).decode()
    finally:
        endpoint.stop()


def lean_text(name: str, unit: str, description: str, buckets: tuple[float, ...], records: Records) -> str:
    registry = CollectorRegistry(auto_describe=True)
    histogram = Histogram(name, unit, description, buckets)
    registry.register(histogram)
    for amount, attrs in records:
        histogram.record(amount, attrs)
    return generate_latest(registry).decode()


@pytest.mark.parametrize(
    ("name", "unit", "buckets", "prom"),
    [
        ("rpc.server.duration", "ms", MS_BUCKETS, "rpc_server_duration_milliseconds"),
        ("http.server.request.duration", "s", SECONDS_BUCKETS, "http_server_request_duration_seconds"),
    ],
)
def test_the_exposition_equals_the_opentelemetry_exporters(
    name: str, unit: str, buckets: tuple[float, ...], prom: str
) -> None:
    records = [(amount, attrs) for attrs in ATTRS[:2] for amount in AMOUNTS] + [(0.02, ATTRS[0])] * 3
    theirs = family(otel_text(name, unit, "Some duration", buckets, records), prom)
    ours = family(lean_text(name, unit, "Some duration", buckets, records), prom)
    assert len(ours) == 2 + 2 * (len(buckets) + 3)  # HELP, TYPE; per series: buckets, +Inf, count, sum
    assert ours == theirs


def test_series_whose_attributes_differ_only_in_order_are_one_series() -> None:
    forward = dict(ATTRS[2])
    backward = dict(reversed(list(forward.items())))
    records = [(0.004, forward), (0.3, backward), (11.0, forward)]
    theirs = family(otel_text("http.d", "s", "d", SECONDS_BUCKETS, records), "http_d_seconds")
    ours = family(lean_text("http.d", "s", "d", SECONDS_BUCKETS, records), "http_d_seconds")
    assert ours == theirs
    assert 'http_d_seconds_count{http_request_method="GET",http_response_status_code="200",' in "\n".join(ours)


def test_nothing_is_exposed_before_the_first_record() -> None:
    assert "duration" not in lean_text("rpc.server.duration", "ms", "d", MS_BUCKETS, [])
    assert "duration" not in otel_text("rpc.server.duration", "ms", "d", MS_BUCKETS, [])


def test_bad_shapes_are_refused() -> None:
    with pytest.raises(ValueError, match="unit"):
        Histogram("x", "furlongs", "d", MS_BUCKETS)
    with pytest.raises(ValueError, match="increasing"):
        Histogram("x", "ms", "d", (1, 1, 2))
    histogram = Histogram("x", "ms", "d", (1.0, 2.0))
    assert not histogram.merge({}, [1, 2], 3.0)  # three counts expected
    assert histogram.take() == []


def test_a_workers_shipped_series_equal_recording_in_the_main_process() -> None:
    """What a read worker ships (counts per bucket and a sum), replayed through the JSON line the main process
    reads, gives the same exposition as recording every duration in the main process."""
    local = frozenset({"/chain.v1.ChainService/GetAccount"})
    attrs: Attributes = {"rpc.service": "chain.v1.ChainService", "rpc.method": "GetAccount", "rpc.grpc.status_code": 0}
    relayed: Attributes = {**attrs, "rpc.method": "SubmitMessage"}
    shipper = RpcShipper(local)
    direct = MetricsEndpoint("chain-node", "127.0.0.1:0")
    main = MetricsEndpoint("chain-node", "127.0.0.1:0")
    try:
        direct_metrics, main_metrics = NodeMetrics(direct), NodeMetrics(main)
        shipped = 0
        for round_ in range(3):  # three lines, one a second in the worker
            for amount in AMOUNTS:
                shipper.record(amount * (round_ + 1), attrs)
                shipper.record(amount, relayed)  # the main process records relayed calls itself
                direct_metrics.rpc_duration.record(amount * (round_ + 1), attrs)
            shipped += replay(json.loads(json.dumps(shipper.take())), main_metrics.rpc_duration)
        assert shipped == 3 * len(AMOUNTS)
        assert shipper.take() == []
        assert replay([["not", "a", "series"], [{}, [-1], 0.0], [{}, [1], "x"]], main_metrics.rpc_duration) == 0
        name = "rpc_server_duration_milliseconds"
        assert family(generate_latest(main.registry).decode(), name) == family(
            generate_latest(direct.registry).decode(), name
        )
    finally:
        direct.stop()
        main.stop()


def test_durations_appended_to_a_shippers_list_ship_what_recording_each_ships() -> None:
    """A worker's successful calls append their durations to a list (served.py); `take` buckets them: the
    same series as recording each, the list emptied, and a second take ships only what came after."""
    local = frozenset({"/chain.v1.ChainService/GetAccount"})
    ok: Attributes = {"rpc.service": "chain.v1.ChainService", "rpc.method": "GetAccount", "rpc.grpc.status_code": 0}
    failed: Attributes = {**ok, "rpc.grpc.status_code": 5}
    listed, recorded = RpcShipper(local), RpcShipper(local)
    durations = listed.durations(ok)
    assert listed.durations(failed) == []  # a second list, its own series
    for amount in AMOUNTS:
        durations.append(amount)
        listed.record(amount * 2, failed)  # a refusal is recorded at once, beside the list
        recorded.record(amount, ok)
        recorded.record(amount * 2, failed)
    assert sorted(listed.take(), key=json.dumps) == sorted(recorded.take(), key=json.dumps)
    assert durations == []
    assert listed.take() == []
    durations.append(0.3)
    assert listed.take() == [[ok, [1 if bound == 0.5 else 0 for bound in (*MS_BUCKETS, None)], 0.3]]


def test_records_from_many_threads_during_scrapes_all_count() -> None:
    """`record` runs on the event loop while prometheus_client's HTTP thread scrapes: nothing is lost."""
    endpoint = MetricsEndpoint("chain-node", "127.0.0.1:0")
    port = endpoint.start()
    try:
        histogram = endpoint.histogram("rpc.server.duration", "ms", "d", MS_BUCKETS)

        scraped = threading.Event()
        done = threading.Event()

        def work() -> None:
            for i in range(5000):
                histogram.record(i % 40 / 4, ATTRS[0])
                if i == 2500:
                    assert scraped.wait(10)  # every thread records on both sides of a scrape

        def scrape() -> None:
            while not done.is_set():
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as reply:
                    assert reply.status == 200
                scraped.set()

        scraper = threading.Thread(target=scrape)
        threads = [threading.Thread(target=work) for _ in range(4)]
        for thread in [scraper, *threads]:
            thread.start()
        for thread in threads:
            thread.join()
        done.set()
        scraper.join()
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as reply:
            text = reply.read().decode()
        count = [line for line in text.splitlines() if line.startswith("rpc_server_duration_milliseconds_count")]
        assert len(count) == 1 and count[0].endswith(" 20000.0"), count
    finally:
        endpoint.stop()


def test_a_kept_series_key_records_what_the_attributes_record() -> None:
    by_attributes, by_key = Histogram("x", "s", "d", SECONDS_BUCKETS), Histogram("x", "s", "d", SECONDS_BUCKETS)
    keys = [series_key(attrs) for attrs in ATTRS]
    for amount in AMOUNTS:
        for attrs, key in zip(ATTRS, keys, strict=True):
            by_attributes.record(amount, attrs)
            by_key.record_key(amount, key)
    assert by_key.take() == by_attributes.take() != []
