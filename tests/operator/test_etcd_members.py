"""The operator's etcd membership (chain_operator.etcd_members) against real etcd processes, under writes
from a real replicated chain: scale 3 -> 5 -> 3 and a member replaced with an empty data dir, one member
change at a time on a healthy cluster, with 0 acknowledged messages lost and 0 forks."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from chain_operator.etcd_members import Change, Kind, Members, Wanted, converge, health
from node.server.ordering.etcd.client import EtcdClient
from tests.fixtures.etcdproc import EtcdCluster
from tests.fixtures.replicaset import (
    Load,
    ReplicaSet,
    assert_same_chain,
    committed_counts,
    funded_actors,
    status,
    wait_height,
)


def layout(etcd: EtcdCluster) -> Callable[[int], Wanted]:
    """Ordinal -> member, ports allocated on first use (the fixture's members are etcd0, etcd1, ...)."""

    def member(i: int) -> Wanted:
        if i >= len(etcd.members):
            return Wanted(f"etcd{i}", f"http://127.0.0.1:{i}", f"http://127.0.0.1:{i}")  # never asked
        m = etcd.members[i]
        return Wanted(m.name, m.peer_url, m.client_url)

    return member


class Host:
    """What the StatefulSet does in a cluster: run the pods of the ordinals below `running`, each started
    with the membership the last change named; a pod that exits is started again (a restart loop) from an
    empty data dir (in the chart the init container empties the volume of a member the operator replaced;
    no member of this test restarts with data)."""

    def __init__(self, etcd: EtcdCluster, lost: frozenset[str] = frozenset()) -> None:
        self.etcd = etcd
        # members whose volume was lost: etcd cannot run them under their old id (it panics on the leader's
        # first commit index past its empty log), so their pods crash until the operator replaces them
        self.lost = set(lost)

    async def apply(self, change: Change) -> None:
        if change.kind is Kind.REPLACE:
            self.lost.discard(change.member)
        for i in range(change.running):
            if f"etcd{i}" in self.lost:
                continue
            if not self.etcd.running(i):
                self.etcd.wipe(i)
                self.etcd.start_member(i, change.initial_cluster)
        for i in range(change.running, len(self.etcd.members)):
            self.etcd.members[i].kill()


async def members_healthy(etcd: EtcdCluster) -> bool:
    client = EtcdClient(etcd.endpoints)
    try:
        members = await client.member_list()
        return (await health(members, None)).healthy(members)
    finally:
        await client.close()


class Checked(Members):
    """The reconciler, asserting that each member added or removed was added or removed on a healthy cluster."""

    def __init__(self, client: EtcdClient, etcd: EtcdCluster, replace_after: float) -> None:
        super().__init__(client, replace_after=replace_after)
        self.etcd = etcd

    async def reconcile(self, grid: Callable[[int], Wanted], size: int) -> Change:
        before = await members_healthy(self.etcd)
        change = await super().reconcile(grid, size)
        if change.kind in (Kind.ADD, Kind.REMOVE):
            assert before, f"{change.kind} {change.member} on an unhealthy cluster"
        return change


async def scale(
    etcd: EtcdCluster, size: int, *, replace_after: float = 300.0, lost: frozenset[str] = frozenset()
) -> list[Change]:
    client = EtcdClient(etcd.endpoints[:3])
    try:
        etcd.grow(size)
        host = Host(etcd, lost)
        return await converge(Checked(client, etcd, replace_after), layout(etcd), size, host.apply, timeout=60)
    finally:
        await client.close()


async def member_names(etcd: EtcdCluster) -> list[str]:
    client = EtcdClient(etcd.endpoints)
    try:
        return sorted(m.name for m in await client.member_list())
    finally:
        await client.close()


def test_scale_and_replace_under_load(tmp_path: Path) -> None:
    etcd = EtcdCluster(tmp_path / "etcd", size=3).start()
    nodes = ReplicaSet(tmp_path / "nodes", etcd).start(3)
    try:
        with nodes.nodes[0].client() as c:
            actors = funded_actors(c, nodes.authority(), 3, units=10)
        load = Load(nodes, actors).start()
        try:
            up = asyncio.run(scale(etcd, 5))
            assert [(c.kind, c.member) for c in up] == [(Kind.ADD, "etcd3"), (Kind.ADD, "etcd4")]
            assert asyncio.run(member_names(etcd)) == [f"etcd{i}" for i in range(5)]
            down = asyncio.run(scale(etcd, 3))
            assert [(c.kind, c.member) for c in down] == [(Kind.REMOVE, "etcd4"), (Kind.REMOVE, "etcd3")]
            assert asyncio.run(member_names(etcd)) == ["etcd0", "etcd1", "etcd2"]
            etcd.shrink(3)  # the pods of the removed members went (scaled in: their volumes too)
            # member 1's pod comes back with an empty volume: etcd refuses to run it under its old id
            etcd.wipe(1)
            replaced = asyncio.run(scale(etcd, 3, replace_after=1.0, lost=frozenset({"etcd1"})))
            assert [(c.kind, c.member) for c in replaced] == [(Kind.REPLACE, "etcd1")]
            etcd.wait_healthy(30)
            assert asyncio.run(member_names(etcd)) == ["etcd0", "etcd1", "etcd2"]
            time.sleep(1)  # writes keep going on the replaced member's cluster
        finally:
            load.stop()
        load.settle()
        height = max(status(n).block_height for n in nodes.nodes)
        wait_height(nodes.nodes, height)
        counts = committed_counts(assert_same_chain(nodes.nodes, height))  # 0 forks
        assert len(load.sent) >= 50
        lost = [h for h in load.sent if counts.get(h) != 1]
        assert not lost, f"{len(lost)} acknowledged messages lost or repeated"
    finally:
        nodes.stop()
        etcd.stop()


@pytest.mark.soak
def test_scale_rounds_under_load(tmp_path: Path) -> None:
    """Ten rounds of 3 -> 5 -> 3 with a replacement in each, under load."""
    etcd = EtcdCluster(tmp_path / "etcd", size=3).start()
    nodes = ReplicaSet(tmp_path / "nodes", etcd).start(3)
    try:
        with nodes.nodes[0].client() as c:
            actors = funded_actors(c, nodes.authority(), 4, units=20)
        load = Load(nodes, actors).start()
        try:
            for round_ in range(10):
                asyncio.run(scale(etcd, 5))
                asyncio.run(scale(etcd, 3))
                etcd.wipe(round_ % 3)
                asyncio.run(scale(etcd, 3, replace_after=1.0))
        finally:
            load.stop()
        load.settle(300)
        height = max(status(n).block_height for n in nodes.nodes)
        wait_height(nodes.nodes, height)
        counts = committed_counts(assert_same_chain(nodes.nodes, height))
        assert all(counts.get(h) == 1 for h in load.sent)
    finally:
        nodes.stop()
        etcd.stop()
