"""Execute once on the etcd leader, in process on a real etcd and real LMDB chains: a member that followed
the log (its pending state flat) is elected, seals the blocks it cuts from the open blocks its admissions
filled, and another store replays those blocks from the log with `apply_block` to the same state."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from chain.v1 import message_pb2 as pb
from node.chain import Chain
from node.params import ChainParams
from node.sdk.keys import Ed25519Key, Secp256k1Key
from node.sdk.messages import MessageBuilder
from node.server.ordering.etcd.client import EtcdClient, op_put
from node.server.ordering.etcd.log import BlockLog, Keys
from node.server.ordering.etcd.replicated import ReplicationSettings
from tests.fixtures.etcdproc import EtcdCluster
from tests.fixtures.orderer import etcd_member

KEYS = Keys(b"/execute-once/")


async def test_the_elected_leader_seals_its_open_blocks_and_a_replay_agrees(tmp_path: Path, etcd1: EtcdCluster) -> None:
    params = ChainParams(genesis_time_ms=int(time.time() * 1000) - 60_000)
    client = EtcdClient(etcd1.endpoints)
    lease = await client.grant(60)  # a writer that appends two empty blocks, then goes away
    await client.txn([], [op_put(KEYS.leader, b'{"id": "writer", "addr": "127.0.0.1:1"}', lease)])
    log = BlockLog(client, KEYS)
    await log.seed(1)
    writer = Chain.open(tmp_path / "writer", params)
    for n in range(2):
        out = writer.build(params.genesis_time_ms + n * 1000, [])
        assert await log.append(out.block, lease)
        writer.commit(out)
    writer.close()

    settings = ReplicationSettings(node_id="member", poll_interval=0.05, block_interval=0.1, empty_block_interval=60)
    replay = Chain.open(tmp_path / "replay", params)
    try:
        async with etcd_member(tmp_path / "member", client, KEYS, params, settings, mempool_size=1000) as (
            orderer,
            chain,
        ):
            mempool = orderer.mempool
            await orderer.start()
            await client.revoke(lease)
            deadline = time.monotonic() + 20
            while orderer.role != "leader" or chain.height < 2:
                assert time.monotonic() < deadline, "the member was not elected"
                await asyncio.sleep(0.05)
            wallets = [Secp256k1Key.generate() for _ in range(6)]
            builders = [MessageBuilder(w.address, Ed25519Key.generate()) for w in wallets]
            first = [b.signer_add(w, 0) for b, w in zip(builders, wallets, strict=True)]
            assert all(o.accepted for o in await orderer.submit(first[:3]))
            await asyncio.sleep(0.15)
            assert all(o.accepted for o in await orderer.submit(first[3:]))
            committed: set[bytes] = set()
            later = [b.account_data(pb.ACCOUNT_FIELD_BIO, f"bio {i}") for i, b in enumerate(builders)]
            while len(committed) < len(first):
                assert time.monotonic() < deadline, "the leader did not commit the messages"
                await asyncio.sleep(0.05)
                committed = {h for h in (bytes(m.hash) for m in first) if h not in mempool}
            assert all(o.accepted for o in await orderer.submit(later))
            while len(mempool):
                assert time.monotonic() < deadline, "the leader did not commit the messages"
                await asyncio.sleep(0.05)
            assert orderer.blocks_from_pending >= 2 and orderer.blocks_executed_again == 0
            # a store that only replays the log (apply_block checks every header and state root) ends equal
            replayed = 0
            for number, value in (await log.tail(0, 100)).entries:
                out = replay.apply(await log.decode(number, value), verify=True)
                replay.commit(out)
                replayed += len(out.applied)
            assert replayed == len(first) + len(later)
            assert replay.height == chain.height and replay.head() == chain.head()
    finally:
        replay.close()
