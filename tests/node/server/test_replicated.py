"""The etcd orderer in-process on a real etcd and a real LMDB chain: catch-up health and leader blocks."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from chain.v1 import message_pb2 as pb
from node.chain import Chain
from node.errors import MessageRejected, Reason
from node.params import ChainParams
from node.server.ordering.etcd import rpc_pb2
from node.server.ordering.etcd.client import EtcdClient, op_put
from node.server.ordering.etcd.log import BlockLog, Keys
from node.server.ordering.etcd.replicated import ReplicatedOrderer, ReplicationSettings
from tests.fixtures.etcdproc import EtcdCluster
from tests.fixtures.orderer import etcd_member

KEYS = Keys(b"/orderer-test/")
PARAMS = ChainParams(genesis_time_ms=1_800_000_000_000)


async def write_log(client: EtcdClient, path: Path, blocks: int) -> int:
    """Blocks 1..`blocks` built on another chain and appended under a lease this test holds."""
    lease = await client.grant(60)
    await client.txn([], [op_put(KEYS.leader, b'{"id": "writer", "addr": "127.0.0.1:1"}', lease)])
    log = BlockLog(client, KEYS)
    await log.seed(1)
    chain = Chain.open(path, PARAMS)
    try:
        for n in range(blocks):
            out = chain.build(PARAMS.genesis_time_ms + n * 1000, [])
            assert await log.append(out.block, lease)
            chain.commit(out)
    finally:
        chain.close()
    return lease


async def test_not_serving_while_more_than_max_lag_behind(tmp_path: Path, etcd1: EtcdCluster) -> None:
    client = EtcdClient(etcd1.endpoints)
    lease = await write_log(client, tmp_path / "writer", 30)
    settings = ReplicationSettings(
        node_id="reader", poll_interval=0.1, max_lag_blocks=10, fetch_limit=2, empty_block_interval=0.5
    )
    async with etcd_member(tmp_path / "reader", client, KEYS, PARAMS, settings) as (orderer, chain):
        assert not orderer.serving  # the log has not been read yet
        await orderer.start()
        seen: list[tuple[int, bool]] = []
        deadline = time.monotonic() + 20
        while chain.height < 30:
            seen.append((chain.height, orderer.serving))
            assert time.monotonic() < deadline
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.3)
        assert orderer.serving and orderer.log_height == 30
        assert any(not serving and 0 < h < 20 for h, serving in seen), "never NOT_SERVING while far behind"
        assert all(serving for h, serving in seen if h >= 20)
        assert orderer.role == "follower" and orderer.leader == "127.0.0.1:1"
        await client.revoke(lease)  # the writer goes away: this member is elected and cuts the next block
        deadline = time.monotonic() + 10
        while chain.height < 31:
            assert time.monotonic() < deadline, "the new leader did not cut a block"
            await asyncio.sleep(0.05)
        assert orderer.role == "leader" and orderer.leader == "127.0.0.1:2"
        assert (await BlockLog(client, KEYS).tail(30, 5)).entries[0][0] == 31


async def append_more(client: EtcdClient, path: Path, lease: int, blocks: int) -> None:
    """`blocks` more blocks on the writer's chain at `path`, appended under `lease`."""
    log = BlockLog(client, KEYS)
    chain = Chain.open(path, PARAMS)
    try:
        for _ in range(blocks):
            out = chain.build(PARAMS.genesis_time_ms + (chain.height + 1) * 1000, [])
            assert await log.append(out.block, lease)
            chain.commit(out)
    finally:
        chain.close()


async def wait_height(chain: Chain, height: int, within: float) -> float:
    started = time.monotonic()
    while chain.height < height:
        assert time.monotonic() - started < within, f"at {chain.height}, not {height}, after {within} s"
        await asyncio.sleep(0.01)
    return time.monotonic() - started


async def wait_live(orderer: ReplicatedOrderer) -> None:
    deadline = time.monotonic() + 5
    while not orderer.watch.live:
        assert time.monotonic() < deadline, "the log watch never went live"
        await asyncio.sleep(0.01)


class CountingLog(BlockLog):
    reads = 0

    async def tail(self, after: int, limit: int):
        self.reads += 1
        return await super().tail(after, limit)


async def test_a_member_reads_the_log_when_the_watch_says_it_moved(tmp_path: Path, etcd1: EtcdCluster) -> None:
    """With the watch live the member reads the log when a block lands (well before the resync interval) and
    not on a timer: ~20 reads a second per member before."""
    client = EtcdClient(etcd1.endpoints)
    lease = await write_log(client, tmp_path / "writer", 3)
    settings = ReplicationSettings(node_id="reader", poll_interval=0.05, resync_interval=30.0)
    async with etcd_member(tmp_path / "reader", client, KEYS, PARAMS, settings) as (orderer, chain):
        orderer.log = counting = CountingLog(client, KEYS)
        await orderer.start()
        await wait_height(chain, 3, 10)
        await wait_live(orderer)
        await asyncio.sleep(0.2)
        before = counting.reads
        await asyncio.sleep(1.0)
        assert counting.reads - before <= 1, f"{counting.reads - before} reads in an idle second"
        for height in (4, 5, 6):
            await append_more(client, tmp_path / "writer", lease, 1)
            assert await wait_height(chain, height, 5) < 5  # woken by the watch, not the 30 s resync
        assert orderer.watch.opened == 1


class SilentWatchClient(EtcdClient):
    """A watch that is created and then says nothing, as a stream to an etcd member cut off from its peers."""

    async def watch(self, key: bytes):
        yield rpc_pb2.WatchResponse(created=True)
        await asyncio.Event().wait()


async def test_a_silent_watch_is_noticed_and_opened_again(tmp_path: Path, etcd1: EtcdCluster) -> None:
    client = SilentWatchClient(etcd1.endpoints)
    lease = await write_log(client, tmp_path / "writer", 2)
    settings = ReplicationSettings(node_id="reader", poll_interval=0.05, resync_interval=0.5)
    async with etcd_member(tmp_path / "reader", client, KEYS, PARAMS, settings) as (orderer, chain):
        await orderer.start()
        await wait_height(chain, 2, 10)
        await wait_live(orderer)
        await asyncio.sleep(0.6)  # the first resync read after the watch: nothing moved, nothing to reopen
        assert orderer.watch.opened == 1
        await append_more(client, tmp_path / "writer", lease, 1)
        await wait_height(chain, 3, 5)  # the resync read finds it
        deadline = time.monotonic() + 5
        while orderer.watch.opened < 2:  # and, since the watch said nothing, opens it again
            assert time.monotonic() < deadline, "the silent watch was never opened again"
            await asyncio.sleep(0.01)


async def test_a_member_that_lost_or_gave_up_the_lead_never_forwards_to_itself(
    tmp_path: Path, etcd1: EtcdCluster
) -> None:
    """Its own leader key, seen after its lease lapsed or while it stops, is no leader to forward to: the
    refusal comes at once with a retry hint (forwarding to its own address would wait on itself until its
    listener cancels the call, and the member that forwarded to it would have to answer OUTCOME_UNKNOWN)."""
    client = EtcdClient(etcd1.endpoints)
    settings = ReplicationSettings(node_id="solo-member", poll_interval=0.05, empty_block_interval=0.2)
    async with etcd_member(tmp_path / "m", client, KEYS, PARAMS, settings) as (orderer, _chain):
        await orderer.start()
        deadline = time.monotonic() + 10
        while orderer.role != "leader":
            assert time.monotonic() < deadline, "the only member was never elected"
            await asyncio.sleep(0.05)
        assert orderer.election is not None
        orderer.election.lease = 0  # its lease lapsed; the election has not seen the key go yet
        with pytest.raises(MessageRejected) as lapsed:
            await asyncio.wait_for(orderer.submit([pb.Message()]), 1)
        assert lapsed.value.reason is Reason.NOT_LEADER and lapsed.value.values["retry_after_ms"]
        await orderer.stop()
        started = time.monotonic()
        with pytest.raises(MessageRejected) as stopped:
            await asyncio.wait_for(orderer.submit([pb.Message()]), 1)
        assert stopped.value.reason is Reason.DRAINING and stopped.value.values["retry_after_ms"]
        assert time.monotonic() - started < 0.5
