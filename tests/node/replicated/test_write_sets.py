"""Members applying the leader's write sets (`--verify-blocks root`, the default) beside one executing every
block again (`--verify-blocks full`), real processes on real etcd, one cluster for the module: under load
with messages at the edges of the time rules, every member holds the same block hash and state root at every
height and none diverges; the root members applied blocks by write set and the full one executed them."""

from __future__ import annotations

import os
import random
import threading
import time
from collections.abc import Iterator

import grpc
import pytest

from chain.v1 import message_pb2 as pb
from node.constants import MAX_FUTURE_DRIFT, MAX_QUOTA_MESSAGE_AGE
from tests.fixtures.actors import RemoteActor
from tests.fixtures.etcdproc import EtcdCluster
from tests.fixtures.nodeproc import NodeProcess
from tests.fixtures.replicaset import (
    Load,
    ReplicaSet,
    assert_same_chain,
    committed_counts,
    funded_actors,
    status,
    wait_height,
)
from tests.fixtures.scrape import scrape, value


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ReplicaSet]:
    """Two members applying write sets (the default) and a third executing every block (`full`), on a
    one-member etcd of their own."""
    work = tmp_path_factory.mktemp("mixed")
    etcd = EtcdCluster(work / "etcd", 1).start()
    nodes = ReplicaSet(work, etcd).start(2)
    try:
        nodes.add("--verify-blocks", "full")
        yield nodes
    finally:
        nodes.stop()
        etcd.stop()


def blocks_by(node: NodeProcess, source: str) -> float:
    samples = scrape(node.ready["metrics_port"])
    return value(samples, "chain_blocks_committed_total", chain_block_source=source)


def edge_messages(actor: RemoteActor, rng: random.Random) -> list[pb.Message]:
    """Follows stamped at the edges of the time rules (a second inside or outside the stale bound of a quota
    message, and of the future drift): some are refused at admission, the rest must apply alike everywhere."""
    now = int(time.time())
    stamps = [now - MAX_QUOTA_MESSAGE_AGE + rng.choice((-1, 0, 1, 2)), now + MAX_FUTURE_DRIFT + rng.choice((-1, 0, 1))]
    return [actor.b.follow(os.urandom(20), timestamp=t) for t in stamps]


def send_edges(nodes: ReplicaSet, actors: list[RemoteActor], stop: threading.Event, sent: list[int]) -> None:
    rng = random.Random(7)
    while not stop.is_set():
        node = rng.choice(nodes.alive())
        try:
            with node.client(timeout=5) as c:
                results = c.batch(edge_messages(rng.choice(actors), rng))
            sent[0] += sum(r.accepted for r in results)
            sent[1] += sum(not r.accepted for r in results)
        except grpc.RpcError:
            pass
        time.sleep(0.05)


def test_root_and_full_members_agree_under_load(mixed: ReplicaSet) -> None:
    with mixed.nodes[1].client() as c:
        actors = funded_actors(c, mixed.authority(), 8, units=10)
    load = Load(mixed, actors[:6], batch=50, pause=0.0).start()
    stop, edges = threading.Event(), [0, 0]
    sender = threading.Thread(target=send_edges, args=(mixed, actors[6:], stop, edges), daemon=True)
    sender.start()
    deadline = time.monotonic() + 60
    while len(load.sent) < 3000 and time.monotonic() < deadline:
        time.sleep(0.2)
    load.stop()
    stop.set()
    sender.join(30)
    load.settle()
    height = max(status(n).block_height for n in mixed.nodes)
    wait_height(mixed.nodes, height)
    counts = committed_counts(assert_same_chain(mixed.nodes, height))  # hash and state root at every height
    assert len(load.sent) >= 3000
    assert all(counts.get(h) == 1 for h in load.sent)
    assert edges[0] and edges[1], f"the edges of the time rules were both taken and refused: {edges}"
    root, full = mixed.nodes[:2], mixed.nodes[2]
    for node in mixed.nodes:
        assert value(scrape(node.ready["metrics_port"]), "chain_member_diverged") == 0
        assert status(node).block_height == height
    followers = [n for n in root if status(n).role == "follower"]
    assert followers and all(blocks_by(n, "writeset") > 0 for n in followers)
    assert blocks_by(full, "writeset") == 0 and blocks_by(full, "log") + blocks_by(full, "local") > 0
