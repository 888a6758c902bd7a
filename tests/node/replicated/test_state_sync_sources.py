"""Which member a joining member state-syncs from (join.sources): fresh snapshots first, spread over the
members by a hash of the joiner's id; older ones after them, newest first."""

from __future__ import annotations

from collections import Counter

from node.server.ordering.etcd.join import SPREAD_BLOCKS, sources
from node.server.snapshots.sync_client import Peer


def peer(node_id: str, block: int) -> Peer:
    return Peer(node_id, f"{node_id}:50054", block, f"snap-{block}")


def test_fresh_snapshots_come_first_and_joiners_spread_over_them() -> None:
    newest = 100_000
    peers = [
        peer("n0", newest),
        peer("n1", newest - 50),
        peer("n2", newest - 10),
        peer("old", newest - SPREAD_BLOCKS - 1),
    ]
    firsts = Counter(sources(peers, f"joiner-{i}")[0].node_id for i in range(300))
    assert set(firsts) == {"n0", "n1", "n2"}  # the stale one is never first
    assert min(firsts.values()) > 60  # about a third each
    for i in range(20):
        order = sources(peers, f"joiner-{i}")
        assert order == sources(peers, f"joiner-{i}")  # the same order at every try
        assert order[-1].node_id == "old"


def test_older_ones_follow_newest_first() -> None:
    peers = [peer("a", 10), peer("b", 50_000), peer("c", 20_000), peer("d", 100_000)]
    assert [p.node_id for p in sources(peers, "j")][1:] == ["b", "c", "a"]
    assert sources([], "j") == []
