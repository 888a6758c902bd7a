"""Leader election on a real etcd: one leader at a time, fast hand-over on stop, takeover after a crash."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import pytest

from node.server.ordering.etcd.client import EtcdClient
from node.server.ordering.etcd.election import Election
from node.server.ordering.etcd.log import Keys
from tests.fixtures.etcdproc import EtcdCluster

KEYS = Keys(b"/election/")


async def until(predicate: Callable[[], bool], timeout: float) -> float:
    start = time.monotonic()
    while not predicate():
        assert time.monotonic() - start < timeout, "condition not reached"
        await asyncio.sleep(0.02)
    return time.monotonic() - start


async def test_one_leader_then_handover(etcd1: EtcdCluster) -> None:
    clients = [EtcdClient(etcd1.endpoints) for _ in range(3)]
    members = [Election(c, KEYS, f"m{i}", f"127.0.0.1:{9000 + i}", ttl=2, poll=0.05) for i, c in enumerate(clients)]
    try:
        for m in members:
            await m.start()
        await until(lambda: all(m.current is not None for m in members), 5)
        leaders = [m for m in members if m.is_leader]
        assert len(leaders) == 1
        first = leaders[0]
        assert all(m.current is not None and m.current.id == first.node_id for m in members)

        await first.stop()  # a clean stop revokes the lease: the next leader is elected at once
        rest = [m for m in members if m is not first]
        took = await until(lambda: sum(m.is_leader for m in rest) == 1, 2)
        assert took < 1.5
        second = next(m for m in rest if m.is_leader)

        assert second._task is not None
        second._task.cancel()  # a crash: no revoke; the lease must expire first (TTL 2 s)
        with pytest.raises(asyncio.CancelledError):
            await second._task
        second._task = None
        second.lease = 0
        third = next(m for m in rest if m is not second)
        await until(lambda: third.is_leader, 6)
    finally:
        for m in members:
            await m.stop()
        for c in clients:
            await c.close()


async def test_restarted_member_clears_its_stale_key(etcd1: EtcdCluster) -> None:
    client = EtcdClient(etcd1.endpoints)
    old = Election(client, KEYS, "same", "127.0.0.1:1", ttl=10, poll=0.05)
    new = Election(client, KEYS, "same", "127.0.0.1:2", ttl=10, poll=0.05)
    try:
        await old.start()
        await until(lambda: old.is_leader, 5)
        assert old._task is not None
        old._task.cancel()  # crashed: its key lives on for up to 10 s
        with pytest.raises(asyncio.CancelledError):
            await old._task
        old._task = None
        old.lease = 0
        await new.start()
        took = await until(lambda: new.is_leader, 3)  # far sooner than the old lease's TTL
        assert took < 3
    finally:
        await new.stop()
        await client.close()
