"""The seal's fast path against references, on random workloads over real LMDB stores.

The seal copies each message once into its chunk, reads the latest blocks' tree nodes from memory
(`RecentNodes`) and commits puts in one sorted pass. Each block it makes must equal: the block laid out
the old way (`Block(chunks=make_chunks(...))`), byte for byte; a follower's `apply_block` over its own
store read without the memory of recent nodes; and a state root rebuilt from scratch (`build_tree`) over
every public-state record in the store.
"""

from __future__ import annotations

import contextlib
import random
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest

from chain.v1 import block_pb2
from chain.v1 import message_pb2 as pb
from node import merkle
from node.block import chunk_hashes, fill_chunks, header_hash, make_chunks
from node.chain import Chain
from node.constants import MESSAGES_PER_CHUNK
from node.errors import MessageRejected
from node.merkle.store import DictNodeStore, RecentNodes
from node.server.write.pending import PendingBlocks
from node.state.transition import BlockOutput, apply_block
from node.storage import chainlog, schema
from node.storage.lmdb_store import LmdbStore
from tests.harness import Harness, random_message


def assert_same_block(ours: BlockOutput, theirs: BlockOutput) -> None:
    assert ours.block.SerializeToString(deterministic=True) == theirs.block.SerializeToString(deterministic=True)
    assert [r.SerializeToString() for r in ours.applied] == [r.SerializeToString() for r in theirs.applied]
    assert dict(ours.writes) == dict(theirs.writes)
    assert ours.tree_nodes == theirs.tree_nodes


def public_state_root(chain: Chain) -> bytes:
    """The reference: the tree built from scratch over every public-state record."""
    with chain.read() as (view, _):
        items = {k: v for prefix in range(1, schema.TREE_PREFIX_LIMIT) for k, v in view.scan(bytes([prefix]))}
    return merkle.build_tree(items).root


def seal_next(h: Harness, msgs: list[pb.Message]) -> list[BlockOutput]:
    """Admit `msgs` into open blocks at the harness's time, then seal and commit each open block in turn
    as the solo orderer does (tree nodes read through the chain's memory of recent nodes)."""
    chain = h.chain
    snapshot = chain.store.begin_read()
    pending = PendingBlocks(chain.params, snapshot.view)
    wall_ms = h.now * 1000
    for msg in msgs:
        with contextlib.suppress(MessageRejected):  # the random mix holds messages that do not apply
            pending.admit(msg, wall_ms)
    outputs = []
    while pending.blocks:
        seal = pending.sealer(chain.tree_nodes(snapshot.nodes), wall_ms)
        assert seal is not None
        out = seal()
        chain.commit(out)
        outputs.append(out)
        old, snapshot = snapshot, chain.store.begin_read()
        pending = pending.drop_committed(snapshot.view)
        old.close()
    snapshot.close()
    h.now += 1
    return outputs


def replay_plain(follower: Chain, block: block_pb2.Block) -> BlockOutput:
    """`apply_block` over the follower's store, its tree nodes read from LMDB only (each checked)."""
    with follower.read() as (view, nodes):
        out = apply_block(view, merkle.InProcessUpdater(nodes), follower.params, block, verifier=follower.verifier)
    follower.commit(out)
    return out


@pytest.mark.parametrize(("seed", "capacity"), [(1, 100_000), (2, 100_000), (3, 5), (4, 0)])
def test_sealed_blocks_equal_the_references(tmp_path: Path, seed: int, capacity: int) -> None:
    rng = random.Random(seed)
    h = Harness(tmp_path / "leader")
    h.chain.recent_nodes = RecentNodes(capacity)  # 5: almost every read misses, evictions on every block; 0: all
    actors = [h.actor(units=3) for _ in range(4)]
    projects = [h.commit(a.b.project_create(f"base{i}")).applied[0].message.hash for i, a in enumerate(actors)]
    follower = Chain.open(tmp_path / "follower", h.chain.params)
    for number in range(1, h.chain.height + 1):
        with h.chain.read() as (view, _):
            block = chainlog.read_block(view, number)
        assert block is not None
        replay_plain(follower, block)
    sealed = 0
    for _ in range(6):
        msgs = [random_message(rng, h, actors, projects) for _ in range(rng.randrange(20, 120))]
        for out in seal_next(h, msgs):
            sealed += len(out.applied)
            messages = [r.message for r in out.applied]
            old_layout = block_pb2.Block(header=out.block.header, hash=out.block.hash, chunks=make_chunks(messages))
            assert out.block.SerializeToString() == old_layout.SerializeToString()
            assert out.block.hash == header_hash(out.block.header)
            assert_same_block(out, replay_plain(follower, out.block))
            assert out.block.header.state_root == public_state_root(h.chain) == public_state_root(follower)
            projects += [m.hash for m in messages if m.data.type == pb.MESSAGE_TYPE_PROJECT_CREATE]
    assert sealed > 100
    assert len(h.chain.recent_nodes) <= capacity
    h.chain.close()
    follower.close()


@pytest.mark.parametrize("count", [0, 1, MESSAGES_PER_CHUNK - 1, MESSAGES_PER_CHUNK, MESSAGES_PER_CHUNK + 1, 1203])
def test_fill_chunks_lays_out_the_block_as_make_chunks(count: int) -> None:
    rng = random.Random(count)
    messages = [
        pb.Message(hash=rng.randbytes(32), signer=rng.randbytes(32), signature=rng.randbytes(64)) for _ in range(count)
    ]
    header = block_pb2.BlockHeader(number=7, chunk_hashes=chunk_hashes(messages))
    old = block_pb2.Block(header=header, hash=b"h", chunks=make_chunks(messages))
    new = block_pb2.Block(header=header, hash=b"h")
    fill_chunks(new, messages, chunk_hashes(messages))
    assert new.SerializeToString() == old.SerializeToString()
    assert [c.chunk_hash for c in make_chunks(messages)] == chunk_hashes(messages)


def test_recent_nodes_keep_the_newest_and_fall_back_to_the_store() -> None:
    recent = RecentNodes(capacity=3)
    recent.add({b"a": b"1", b"b": b"2"})
    recent.add({b"c": b"3", b"d": b"4"})
    store = DictNodeStore({b"a": b"stored-a", b"z": b"stored-z"})
    cached = recent.over(store)
    assert len(recent) == 3
    assert [cached.get(k) for k in (b"a", b"b", b"c", b"d", b"z", b"?")] == [
        b"stored-a",  # evicted first: read from the store again
        b"2",
        b"3",
        b"4",
        b"stored-z",
        None,
    ]


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_block_commit_puts_and_deletes_as_a_dict(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    store = LmdbStore(tmp_path / "s", sync=False)
    model: dict[bytes, bytes] = {}
    keys = [bytes([rng.randrange(1, 0x80)]) + rng.randbytes(rng.randrange(0, 6)) for _ in range(300)]
    for _ in range(20):
        writes: dict[bytes, bytes | None] = {}
        for key in rng.sample(keys, 40):
            writes[key] = None if rng.random() < (0.3 if rng.random() < 0.5 else 0.0) else rng.randbytes(5)
        store.commit(writes, {})
        for key, value in writes.items():
            if value is None:
                model.pop(key, None)
            else:
                model[key] = value
        with store.read() as (view, _):
            assert {k: view.get(k) for k in keys} == {k: model.get(k) for k in keys}
    store.close()


def test_key_prefixes_are_the_stored_format() -> None:
    """Key builders start from a byte constant per prefix, made once: each is its `Prefix`'s number, and the
    builders give the stored bytes."""
    for prefix in schema.Prefix:
        assert getattr(schema, f"_{prefix.name}") == bytes([int(prefix)]), prefix.name
    rng = random.Random(5)
    owner, other = rng.randbytes(20), rng.randbytes(32)
    assert schema.account_key(owner) == b"\x01" + owner
    assert schema.signer_key(owner, other) == b"\x03" + owner + other
    assert schema.reaction_key(owner, 2, other, other) == b"\x0b" + owner + b"\x02" + other + other
    assert schema.meta_key("head") == b"\x70head"
    assert schema.message_key(b"\x07" * 32) == b"\x61" + b"\x07" * 32
    assert schema.event_key(3) == b"\x62" + (3).to_bytes(8, "big")


class CountingReads:
    """A read view that counts how often each key is read from it (the store's view underneath)."""

    def __init__(self, view: Any) -> None:
        self.view = view
        self.gets: Counter[bytes] = Counter()

    def get(self, key: bytes) -> bytes | None:
        self.gets[key] += 1
        return cast(bytes | None, self.view.get(key))

    def scan(self, prefix: bytes, start: bytes | None = None, reverse: bool = False) -> Iterator[tuple[bytes, bytes]]:
        return cast(Iterator[tuple[bytes, bytes]], self.view.scan(prefix, start, reverse))


def test_a_block_reads_each_record_of_the_store_once(tmp_path: Path) -> None:
    """The messages of one block read the same records (the signer's account, its key, its grants) again and
    again: the pending state (admission) and a follower's `apply_block` read each from the store once."""
    h = Harness(tmp_path / "leader")
    actor = h.actor(units=3)
    follower = Chain.open(tmp_path / "follower", h.chain.params)
    for number in range(1, h.chain.height + 1):
        with h.chain.read() as (view, _):
            stored = chainlog.read_block(view, number)
        assert stored is not None
        replay_plain(follower, stored)
    msgs = [actor.b.follow(bytes([i]) * 20) for i in range(1, 41)]
    account = schema.account_key(actor.address)

    snapshot = h.chain.store.begin_read()
    admitted = CountingReads(snapshot.view)
    pending = PendingBlocks(h.chain.params, admitted)
    for msg in msgs:
        pending.admit(msg, h.now * 1000)
    assert len(pending.blocks) == 1 and len(pending.blocks[0].body.applied) == len(msgs)
    seal = pending.sealer(h.chain.tree_nodes(snapshot.nodes), h.now * 1000)
    assert seal is not None
    out = seal()
    snapshot.close()
    assert admitted.gets[account] == 1, admitted.gets.most_common(3)
    assert max(admitted.gets.values()) == 1, admitted.gets.most_common(3)

    with follower.read() as (view, nodes):
        applied = CountingReads(view)
        again = apply_block(applied, merkle.InProcessUpdater(nodes), follower.params, out.block)
    assert again.block.header.state_root == out.block.header.state_root
    assert applied.gets[account] == 1, applied.gets.most_common(3)
    assert max(applied.gets.values()) == 1, applied.gets.most_common(3)
    h.chain.close()
    follower.close()
