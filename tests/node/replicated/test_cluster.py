"""Three replicated chain-nodes on real etcd: steady state, leader kill -9, crash and restart."""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest

from tests.fixtures.etcdproc import EtcdCluster
from tests.fixtures.replicaset import (
    Load,
    ReplicaSet,
    assert_same_chain,
    committed_counts,
    funded_actors,
    leader_index,
    status,
    wait_height,
)
from tests.fixtures.scrape import scrape, value


def test_steady_state_load_on_every_node(three: ReplicaSet) -> None:
    with three.nodes[1].client() as c:  # a follower: its writes go through the leader
        actors = funded_actors(c, three.authority(), 6)
    load = Load(three, actors).start()
    time.sleep(4)
    load.stop()
    load.settle()
    height = max(status(n).block_height for n in three.nodes)
    wait_height(three.nodes, height)
    chain = assert_same_chain(three.nodes, height)
    counts = committed_counts(chain)
    assert len(load.sent) >= 100
    assert all(counts.get(h) == 1 for h in load.sent)
    roles = sorted(status(n).role for n in three.nodes)
    assert roles == ["follower", "follower", "leader"]
    leader = three.nodes[leader_index(three)].internal_target
    for n in three.nodes:
        s = status(n)
        assert s.leader == leader
        assert s.applied_height <= s.log_height


def test_leader_kill_under_load(tmp_path: Path, etcd3: EtcdCluster) -> None:
    nodes = ReplicaSet(tmp_path, etcd3).start(3)
    try:
        with nodes.nodes[0].client() as c:
            actors = funded_actors(c, nodes.authority(), 4, units=10)
        load = Load(nodes, actors).start()
        time.sleep(2)
        old = leader_index(nodes)
        survivor = nodes.nodes[(old + 1) % 3]
        before = status(survivor).block_height
        killed_at = time.monotonic()
        nodes.kill(old)
        # a new leader produces a block within 5 s of the kill
        while True:
            s = status(survivor)
            if s.block_height > before + 1 and s.leader and s.leader != nodes.nodes[old].internal_target:
                break
            assert time.monotonic() - killed_at < 5.0, "no new leader committed a block within 5 s"
            time.sleep(0.05)
        time.sleep(2)
        load.stop()
        load.settle()
        nodes.restart(old)  # the old leader comes back as a follower and catches up
        height = max(status(n).block_height for n in nodes.alive())
        wait_height(nodes.nodes, height)
        chain = assert_same_chain(nodes.nodes, height)  # never two different blocks with one number
        counts = committed_counts(chain)
        assert all(counts.get(h) == 1 for h in load.sent), "an acknowledged message is missing or repeated"
        assert len(load.sent) >= 50
        # the blocks went with their write sets, and members applied them so (the restarted one as it caught up)
        for node in (survivor, nodes.nodes[old]):
            samples = scrape(node.ready["metrics_port"])
            assert value(samples, "chain_blocks_committed_total", chain_block_source="writeset") > 0
    finally:
        nodes.stop()


def crash_rounds(nodes: ReplicaSet, rounds: int, seed: int) -> None:
    rng = random.Random(seed)
    with nodes.nodes[0].client() as c:
        actors = funded_actors(c, nodes.authority(), 3, units=10)  # resubmissions must never hit the quota
    load = Load(nodes, actors).start()
    try:
        for _ in range(rounds):
            time.sleep(rng.uniform(0.2, 1.5))
            victim = rng.randrange(len(nodes.nodes))
            nodes.kill(victim)
            time.sleep(rng.uniform(0.0, 1.0))
            nodes.restart(victim)
    finally:
        load.stop()
    load.settle()
    height = max(status(n).block_height for n in nodes.nodes)
    wait_height(nodes.nodes, height)
    counts = committed_counts(assert_same_chain(nodes.nodes, height))
    assert all(counts.get(h) == 1 for h in load.sent)


def test_crash_at_random_moments(three: ReplicaSet) -> None:
    crash_rounds(three, 3, seed=int(time.time()))


@pytest.mark.soak
def test_crash_at_random_moments_soak(three: ReplicaSet) -> None:
    crash_rounds(three, 20, seed=int(time.time()))
