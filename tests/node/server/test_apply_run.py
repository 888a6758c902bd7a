"""A run of blocks ordered elsewhere, applied with `BlockApplier.apply_run` (the pending state moved on once,
after the last block), against the same blocks applied one by one with `apply` (moved on after each): real
LMDB chains, both members holding the same pending messages, some of which the blocks commit."""

from __future__ import annotations

import time
from pathlib import Path

from chain.v1 import message_pb2 as pb
from node.chain import Chain
from node.params import ChainParams
from node.sdk.keys import Ed25519Key, Secp256k1Key
from node.sdk.messages import MessageBuilder
from node.server.events import EventHub
from node.server.ordering.applier import BlockApplier
from node.server.write.mempool import Mempool
from node.server.write.pipeline import Pipeline
from node.server.write.verify import Verifier


def member(path: Path, params: ChainParams) -> tuple[Chain, Mempool, Pipeline, BlockApplier]:
    chain = Chain.open(path, params)
    mempool = Mempool(1000)
    pipeline = Pipeline(chain, mempool, Verifier(0, 262144))
    return chain, mempool, pipeline, BlockApplier(chain, mempool, pipeline, EventHub(100))


async def test_a_run_of_blocks_leaves_the_member_where_one_by_one_does(tmp_path: Path) -> None:
    params = ChainParams(genesis_time_ms=int(time.time() * 1000) - 60_000)
    wallets = [Secp256k1Key.generate() for _ in range(6)]
    builders = [MessageBuilder(w.address, Ed25519Key.generate()) for w in wallets]
    first = [b.signer_add(w, 0) for b, w in zip(builders, wallets, strict=True)]
    later = [b.account_data(pb.ACCOUNT_FIELD_BIO, f"bio {i}") for i, b in enumerate(builders)]
    writer = Chain.open(tmp_path / "writer", params)  # the leader: orders the members' messages and others'
    blocks = []
    for n, msgs in enumerate(([first[0], first[1], first[2]], [first[3], first[4], first[5], later[0]], [later[1]])):
        out = writer.build(params.genesis_time_ms + (n + 1) * 1000, msgs)
        assert len(out.applied) == len(msgs)
        writer.commit(out)
        blocks.append(out.block)

    one, run = member(tmp_path / "one", params), member(tmp_path / "run", params)
    held = [first[0], first[3], later[0], later[3]]  # pending on the member: some committed by the run, later[3] not
    for _, _, pipeline, _ in (one, run):
        assert all(o.accepted for o in await pipeline.submit(held))

    for block in blocks:
        await one[3].apply(block)
    applied: list[int] = []
    await run[3].apply_run(blocks, applied.append)

    assert applied == [1, 2, 3]
    for chain, mempool, pipeline, _ in (one, run):
        assert chain.height == writer.height
        assert bytes(chain.head().hash) == bytes(writer.head().hash)
        assert chain.head().header.state_root == writer.head().header.state_root
        assert [bytes(m.hash) for m in mempool.messages()] == [bytes(later[3].hash)]
        probe = await pipeline.dry_run(later[5])  # depends on first[5], committed by the run's second block
        assert probe.accepted, probe.reason
        again = await pipeline.submit([later[4], first[2]])  # later[4] new; first[2] committed already
        assert again[0].accepted, again[0].reason
        assert not again[1].accepted
    assert [o.reason for o in await one[2].submit([later[2]])] == [o.reason for o in await run[2].submit([later[2]])]
    for chain, *_ in (one, run):
        chain.close()
    writer.close()
