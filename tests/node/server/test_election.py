"""Leader election on a real etcd: one leader at a time, fast hand-over on stop, takeover after a crash."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable, Sequence

import pytest

from node.server.ordering.etcd import election, rpc_pb2
from node.server.ordering.etcd.client import EtcdClient, KeyValue
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


@contextlib.asynccontextmanager
async def running(clients: Sequence[EtcdClient], *, ttl: int, poll: float) -> AsyncIterator[list[Election]]:
    """One started member per client (ids m0, m1, ...); stopped, and their clients closed, on the way out."""
    members = [Election(c, KEYS, f"m{i}", f"127.0.0.1:{9000 + i}", ttl=ttl, poll=poll) for i, c in enumerate(clients)]
    try:
        for m in members:
            await m.start()
        yield members
    finally:
        for m in members:
            await m.stop()
        for c in clients:
            await c.close()


async def test_one_leader_then_handover(etcd1: EtcdCluster) -> None:
    clients = [EtcdClient(etcd1.endpoints) for _ in range(3)]
    async with running(clients, ttl=2, poll=0.05) as members:
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


class CountingClient(EtcdClient):
    """Counts the reads of one key (the election's reads of `leader`)."""

    def __init__(self, endpoints: list[str], key: bytes) -> None:
        super().__init__(endpoints)
        self.key = key
        self.reads = 0

    async def range(self, key: bytes, range_end: bytes = b"", *, limit: int = 0) -> list[KeyValue]:
        if key == self.key:
            self.reads += 1
        return await super().range(key, range_end, limit=limit)


class SilentWatchClient(CountingClient):
    """A watch that is created and then says nothing, as a stream to an etcd member cut off from its peers."""

    async def watch(self, key: bytes) -> AsyncIterator[rpc_pb2.WatchResponse]:
        yield rpc_pb2.WatchResponse(created=True)
        await asyncio.Event().wait()


async def live(member: Election) -> None:
    await until(lambda: member.watch.live and member.current is not None, 5)


async def test_an_idle_member_reads_the_leader_key_once_per_keep_alive(etcd1: EtcdCluster) -> None:
    """With the watch live a member reads `leader` once per keep-alive (TTL/3), not every poll: four times a
    second per member before, a linearizable read through etcd's leader each."""
    clients = [CountingClient(etcd1.endpoints, KEYS.leader) for _ in range(2)]
    async with running(clients, ttl=3, poll=0.05) as members:
        for m in members:
            await live(m)
        before = [c.reads for c in clients]
        await asyncio.sleep(2.0)
        reads = [c.reads - b for c, b in zip(clients, before, strict=True)]
        assert all(r <= 3 for r in reads), f"{reads} reads of the leader key in 2 idle seconds (poll 0.05 s)"
        assert sum(m.is_leader for m in members) == 1


async def test_the_watch_elects_the_next_leader_at_once(etcd1: EtcdCluster) -> None:
    """The leader's key deleted (here a clean stop revokes its lease), the others campaign when the watch
    says so, not at their next scheduled read: with a 10 s poll and TTL 9 (a read every 3 s) the hand-over
    still takes well under a second."""
    clients = [EtcdClient(etcd1.endpoints) for _ in range(2)]
    async with running(clients, ttl=9, poll=10.0) as members:
        for m in members:
            await live(m)
        first = next(m for m in members if m.is_leader)
        other = next(m for m in members if m is not first)
        await asyncio.sleep(0.3)  # both past their first rounds: the next scheduled read is ~3 s away
        await first.stop()
        took = await until(lambda: other.is_leader, 5)
        assert took < 1.0, f"the next leader took {took:.2f} s"


async def test_a_silent_leader_watch_is_noticed_and_opened_again(etcd1: EtcdCluster) -> None:
    """A watch that says nothing: the member's scheduled read (once per keep-alive) finds the key changed,
    campaigns, and opens the watch again."""
    silent = SilentWatchClient(etcd1.endpoints, KEYS.leader)
    plain = EtcdClient(etcd1.endpoints)
    leader = Election(plain, KEYS, "leader", "127.0.0.1:9000", ttl=3, poll=0.05)
    member = Election(silent, KEYS, "member", "127.0.0.1:9001", ttl=3, poll=0.05)
    try:
        await leader.start()
        await until(lambda: leader.is_leader, 5)
        await member.start()
        await live(member)
        await asyncio.sleep(1.2)  # a scheduled read after the watch: nothing moved, nothing to reopen
        assert member.watch.opened == 1
        await leader.stop()
        await until(lambda: member.is_leader, 3)  # the scheduled read finds the key gone
        await until(lambda: member.watch.opened >= 2, 3)  # and, since the watch said nothing, opens it again
    finally:
        await member.stop()
        await leader.stop()
        await silent.close()
        await plain.close()


async def test_a_leader_that_turns_unfit_gives_up_its_key_and_an_unfit_member_never_campaigns(
    etcd1: EtcdCluster,
) -> None:
    """`unfit` (a store that refuses commits, a halted member: replicated.py): the leader deletes its key
    when told to reconsider, long before its lease would lapse (TTL 9), another member is elected, and the
    unfit one does not take the key back, even when it is free, until it is fit again."""
    why = {"m0": "", "m1": ""}
    clients = [EtcdClient(etcd1.endpoints) for _ in range(2)]
    first = Election(clients[0], KEYS, "m0", "127.0.0.1:9000", ttl=9, poll=10.0, unfit=lambda: why["m0"])
    other = Election(clients[1], KEYS, "m1", "127.0.0.1:9001", ttl=9, poll=10.0, unfit=lambda: why["m1"])
    try:
        await first.start()
        await until(lambda: first.is_leader, 5)
        await other.start()
        await live(other)
        await asyncio.sleep(0.3)  # past the first rounds: the next scheduled read is ~3 s away

        why["m0"] = "its store cannot commit blocks: disk full"
        first.reconsider()
        took = await until(lambda: other.is_leader, 5)
        assert took < 1.0, f"the hand-over took {took:.2f} s"
        assert not first.is_leader
        await until(lambda: first.current is not None and first.current.id == "m1", 5)  # it still forwards

        seen = first.changes
        await other.stop()  # the key is free: the unfit member stays out, not even briefly
        for _ in range(50):
            assert not first.is_leader
            await asyncio.sleep(0.02)
        assert first.changes == seen and first.current is None

        why["m0"] = ""  # fit again: it campaigns at its next round
        first.reconsider()
        await until(lambda: first.is_leader, 5)
    finally:
        await other.stop()
        await first.stop()
        for c in clients:
            await c.close()


async def test_an_etcd_outage_is_logged_once_every_few_seconds_and_its_end_once(
    etcd1: EtcdCluster, caplog: pytest.LogCaptureFixture
) -> None:
    """Rounds run several times a second; an outage of etcd must not write a line each."""
    async with running([EtcdClient(etcd1.endpoints, timeout=0.2)], ttl=2, poll=0.05) as (member,):
        await until(lambda: member.is_leader, 5)
        with caplog.at_level("INFO", logger="chain.election"):
            etcd1.kill(0)
            await asyncio.sleep(3)  # ~30 failed rounds
            down = [r for r in caplog.records if "etcd unavailable" in r.getMessage()]
            assert len(down) == 1, [r.getMessage() for r in down]
            etcd1.restart(0)
            await until(lambda: any("answers the election again" in r.getMessage() for r in caplog.records), 15)


async def test_a_lone_member_retrying_leadership_says_so_once_a_minute(
    etcd1: EtcdCluster, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lone member on a failing store takes the key at each of its store's retries and gives it up when the
    retry fails (every 5 s for as long as the disk is full): one warning for the streak, not two lines a
    retry; after GIVE_UP_LOG_EVERY one more, with the count."""
    why = {"m0": ""}
    client = EtcdClient(etcd1.endpoints)
    member = Election(client, KEYS, "m0", "127.0.0.1:9000", ttl=9, poll=10.0, unfit=lambda: why["m0"])

    async def retry_and_fail() -> None:
        why["m0"] = "its store cannot commit blocks: disk full"
        member.reconsider()
        await until(lambda: not member.is_leader, 5)
        why["m0"] = ""  # the next attempt is due: it may lead to make it
        member.reconsider()
        await until(lambda: member.is_leader, 5)

    def said(text: str) -> list[str]:
        return [r.getMessage() for r in caplog.records if text in r.getMessage() and r.levelno >= logging.INFO]

    try:
        await member.start()
        await until(lambda: member.is_leader, 5)
        with caplog.at_level("DEBUG", logger="chain.election"):
            for _ in range(6):
                await retry_and_fail()
            assert said("gives up leadership") == [
                "this node gives up leadership: its store cannot commit blocks: disk full"
            ]
            assert said("leader is") == []  # winning it back is the retry, not news
            assert member.changes >= 7  # the metric still counts every election

            monkeypatch.setattr(election, "GIVE_UP_LOG_EVERY", 0.0)
            await retry_and_fail()
            assert len(said("gives up leadership")) == 2
            assert "(and 5 more times in the last" in said("gives up leadership")[1]
    finally:
        await member.stop()
        await client.close()
