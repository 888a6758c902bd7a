"""The etcd orderer in-process on a real etcd and a real LMDB chain: catch-up health and leader blocks."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from node.chain import Chain
from node.server.events import EventHub
from node.server.ordering.applier import BlockApplier
from node.server.ordering.etcd.client import EtcdClient, op_put
from node.server.ordering.etcd.log import BlockLog, Keys
from node.server.ordering.etcd.replicated import ReplicatedOrderer, ReplicationSettings
from node.server.snapshots import SnapshotManager
from node.server.write.forwarding import Forwarder
from node.server.write.mempool import Mempool
from node.server.write.pipeline import Pipeline
from node.server.write.verify import Verifier
from node.state.params import ChainParams
from tests.fixtures.etcdproc import EtcdCluster

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
    chain = Chain.open(tmp_path / "reader", PARAMS)
    verifier = Verifier(0, 262144)
    mempool = Mempool(100)
    pipeline = Pipeline(chain, mempool, verifier)
    settings = ReplicationSettings(
        node_id="reader", poll_interval=0.1, max_lag_blocks=10, fetch_limit=2, empty_block_interval=0.5
    )
    orderer = ReplicatedOrderer(
        chain,
        mempool,
        BlockApplier(chain, mempool, pipeline, EventHub(100)),
        Forwarder(pipeline, mempool, max_batch=100),
        SnapshotManager(chain, tmp_path / "snapshots"),
        client,
        KEYS,
        settings,
        part_bytes=1 << 20,
    )
    orderer.addr = "127.0.0.1:2"
    try:
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
    finally:
        await orderer.stop()
        pipeline.close()
        chain.close()
        verifier.close()
