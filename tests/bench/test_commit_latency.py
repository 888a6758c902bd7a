"""bench/bench_commit_latency.py: each message's latency is read on the node its client submitted to, the
block interval from the blocks seen; and a short paced phase against a real node commits every message it
sends and measures it."""

from __future__ import annotations

import math
from collections.abc import Iterator

import pytest

from bench.bench_commit_latency import follows, member_of, summarise, watched_phase
from tests.fixtures.nodeproc import NodeProcess


def test_latency_is_read_on_the_submitting_node_and_blocks_give_the_interval() -> None:
    sent = {b"a": 10.0, b"b": 10.0, b"c": 10.1, b"lost": 10.1}
    where = {b"a": 0, b"b": 1, b"c": 0, b"lost": 1}
    first = {b"a": 10.2, b"b": 10.2, b"c": 10.4}  # blocks at 10.2 and 10.4
    second = {b"a": 10.3, b"b": 10.9, b"c": 10.5}  # a follower: its own arrival times
    phase = summarise(sent, [first, second], where, start=10.0, offered=100.0)
    assert (phase.sent, phase.committed) == (4, 3)  # "lost" never arrived on its node
    latencies_ms = sorted([200.0, 900.0, 300.0])  # a on node 0, b on node 1, c on node 0
    assert math.isclose(phase.p50_ms, latencies_ms[1]) and math.isclose(phase.p99_ms, latencies_ms[2])
    assert math.isclose(phase.block_ms, 200.0)
    assert math.isclose(phase.rate, 3 / 0.4)
    nothing = summarise({b"a": 1.0}, [{}], {b"a": 0}, start=1.0, offered=0.0)
    assert nothing.committed == 0 and math.isnan(nothing.p99_ms) and math.isnan(nothing.block_ms)


def test_clients_are_spread_over_the_members_as_the_load_clients_send() -> None:
    class Msg:
        def __init__(self, h: bytes) -> None:
            self.hash = h

    load = [[[Msg(b"0")]], [[Msg(b"1"), Msg(b"1b")]], [[Msg(b"2")]], [[Msg(b"3")]]]
    assert member_of(load, 3) == {b"0": 0, b"1": 1, b"1b": 1, b"2": 2, b"3": 0}  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    proc = NodeProcess(tmp_path_factory.mktemp("latency") / "data").start(timeout=120)
    yield proc
    proc.stop()


def test_a_paced_phase_on_a_real_node_commits_and_measures_every_message(node: NodeProcess) -> None:
    load = follows(node, clients=2, total=200, batch=10)
    assert sum(len(b) for batches in load for b in batches) == 200
    phase = watched_phase([node.grpc_target], load, rate=200.0, timeout=60)
    assert (phase.sent, phase.committed) == (200, 200)
    assert 0 < phase.p50_ms <= phase.p99_ms < 60_000
    assert phase.block_ms > 0  # the phase spans a second: several blocks of the fixture's 50 ms interval
