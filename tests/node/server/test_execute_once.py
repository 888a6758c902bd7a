"""Execute once: a block the solo orderer commits from the pending state (its open blocks, executed at
admission and never again) equals, record for record, the block a follower re-executes with `apply_block`
on its own store from the same parent, including messages whose validity depends on time.

Two real LMDB stores: the leader's (the harness) and a follower's; the clock is the test's."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from chain.v1 import block_pb2
from chain.v1 import message_pb2 as pb
from node import constants as C
from node.chain import Chain
from node.errors import InvalidBlock
from node.sdk.keys import Ed25519Key, Secp256k1Key
from node.server.events import EventHub
from node.server.ordering.orderer import SoloOrderer
from node.server.write.mempool import Mempool
from node.server.write.pending import PendingBlocks
from node.server.write.pipeline import Pipeline
from node.server.write.verify import Verifier
from node.state.transition import BlockOutput
from node.storage import chainlog
from tests.harness import Harness, random_message


class Clock:
    """Wall-clock time in seconds with a fraction; the harness's builders stamp its whole second."""

    def __init__(self, h: Harness) -> None:
        self.h = h
        self.t = float(h.now)

    def __call__(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += seconds
        self.h.now = int(self.t)


class Follower:
    """Another store fed the leader's blocks through apply_block, as an etcd follower or --follow node."""

    def __init__(self, path: Path, leader: Chain) -> None:
        self.chain = Chain.open(path, leader.params)
        self.catch_up(leader)

    def catch_up(self, leader: Chain) -> None:
        for number in range(self.chain.height + 1, leader.height + 1):
            self.replay(_block(leader, number))

    def replay(self, block: block_pb2.Block) -> BlockOutput:
        out = self.chain.apply(block, verify=True)
        self.chain.commit(out)
        return out


def assert_same_block(ours: BlockOutput, theirs: BlockOutput) -> None:
    assert ours.block.hash == theirs.block.hash
    assert ours.block.header.state_root == theirs.block.header.state_root
    assert ours.block.SerializeToString(deterministic=True) == theirs.block.SerializeToString(deterministic=True)
    assert [r.SerializeToString(deterministic=True) for r in ours.applied] == [
        r.SerializeToString(deterministic=True) for r in theirs.applied
    ]
    assert dict(ours.writes) == dict(theirs.writes)
    assert ours.tree_nodes == theirs.tree_nodes


class Node:
    """The leader's write path over the harness's chain: mempool, pipeline, solo orderer."""

    def __init__(self, h: Harness, clock: Clock) -> None:
        self.h = h
        self.mempool = Mempool(100_000)
        self.verifier = Verifier(0, C.MAX_MESSAGE_BYTES)
        self.pipeline = Pipeline(h.chain, self.mempool, self.verifier, clock=clock)
        self.orderer = SoloOrderer(
            h.chain, self.mempool, self.pipeline, EventHub(9999), block_interval=1, empty_block_interval=60, clock=clock
        )
        self.blocks = self.orderer.hub.subscribe("blocks")
        self.messages = self.orderer.hub.subscribe("messages")

    async def submit(self, *msgs: pb.Message) -> list[str]:
        """The reason code of each ("" when accepted)."""
        return [o.reason for o in await self.pipeline.submit(list(msgs))]

    @property
    def open_blocks(self) -> int:
        pending = self.pipeline._pending
        assert pending is not None
        return len(pending.blocks)

    def close(self) -> None:
        self.pipeline.close()
        self.verifier.close()


@pytest.fixture
def chains(tmp_path: Path):
    h = Harness(tmp_path / "leader")
    actors = [h.actor(units=2) for _ in range(3)]
    clock = Clock(h)
    node = Node(h, clock)
    follower = Follower(tmp_path / "follower", h.chain)
    yield h, clock, node, follower, actors
    node.close()
    follower.chain.close()


async def cut(node: Node, follower: Follower) -> BlockOutput:
    """One block from the pending state, replayed by the follower and compared."""
    before = node.orderer.blocks_from_pending
    out = await node.orderer.produce()
    assert node.orderer.blocks_from_pending == before + 1, "the block was executed again, not sealed"
    assert not out.dropped
    assert_same_block(out, follower.replay(out.block))
    # the events published are the follower's records too
    assert await node.blocks.next() == out.block
    assert [await node.messages.next() for _ in out.applied] == list(out.applied)
    assert node.messages.queue.empty()
    return out


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_blocks_from_the_pending_state_equal_a_followers_replay(chains, seed: int) -> None:
    h, clock, node, follower, actors = chains
    rng = random.Random(seed)
    projects = [h.commit(a.b.project_create(f"base{i}")).applied[0].message.hash for i, a in enumerate(actors)]
    follower.catch_up(h.chain)
    node.pipeline.rebuild()
    reasons: list[str] = []
    most_open = 0
    blocks = 0
    for _ in range(160):
        step = rng.random()
        if step < 0.6:
            batch = [random_message(rng, h, actors, projects) for _ in range(rng.randrange(1, 5))]
            reasons += await node.submit(*batch)
        elif step < 0.85:
            clock.advance(rng.choice([0.1, 0.4, 0.9, 1.0, 2.5, 6.0]))
        else:
            out = await cut(node, follower)
            blocks += 1
            projects += [r.message.hash for r in out.applied if r.message.data.type == pb.MESSAGE_TYPE_PROJECT_CREATE]
        most_open = max(most_open, node.open_blocks)
    while len(node.mempool):
        await cut(node, follower)
        blocks += 1
    assert blocks and reasons.count("") > 20
    # the mix did reach the time rules at the wall clock and an open block older than it
    assert {"STALE_TIMESTAMP", "FUTURE_TIMESTAMP"} <= set(reasons), set(reasons)
    assert most_open >= 2
    assert follower.chain.head() == h.chain.head()


def _block(chain: Chain, number: int) -> block_pb2.Block:
    with chain.read() as (view, _):
        block = chainlog.read_block(view, number)
    assert block is not None
    return block


def sync(clock: Clock, h: Harness, follower: Follower, node: Node, at: float) -> None:
    """After blocks committed through the harness: the follower has them, the pipeline moved on, time is `at`."""
    follower.catch_up(h.chain)
    clock.t = at
    h.now = int(at)
    node.pipeline.rebuild()


async def test_a_message_stale_at_the_wall_clock_is_refused_though_the_open_block_is_older(chains) -> None:
    h, clock, node, follower, actors = chains
    a = actors[0]
    opened = h.now
    assert await node.submit(a.b.follow(b"\x01" * 20)) == [""]  # opens a block at `opened`
    clock.advance(5)
    late = a.b.follow(b"\x02" * 20, timestamp=opened - C.MAX_QUOTA_MESSAGE_AGE + 4)  # fresh then, stale now
    assert await node.submit(late) == ["STALE_TIMESTAMP"]
    out = await cut(node, follower)
    assert len(out.applied) == 1 and out.block.header.timestamp_ms == opened * 1000


async def test_a_message_ahead_of_the_open_block_but_not_of_the_wall_clock_opens_the_next(chains) -> None:
    h, clock, node, follower, actors = chains
    a = actors[0]
    opened = h.now
    assert await node.submit(a.b.follow(b"\x01" * 20)) == [""]
    clock.advance(5.5)
    ahead = a.b.follow(b"\x02" * 20, timestamp=h.now + C.MAX_FUTURE_DRIFT)
    assert await node.submit(ahead) == [""]
    assert node.open_blocks == 2
    first, second = await cut(node, follower), await cut(node, follower)
    assert first.block.header.timestamp_ms == opened * 1000 and len(first.applied) == 1
    assert [r.message.hash for r in second.applied] == [ahead.hash]
    assert second.block.header.timestamp_ms == int((opened + 5.5) * 1000)
    assert second.applied[0].event_id == first.applied[0].event_id + 1


async def test_a_custody_key_is_judged_at_the_time_of_the_block_that_commits_it(chains) -> None:
    h, clock, node, follower, actors = chains
    a = actors[0]
    extra = Secp256k1Key.generate()
    start = h.now
    h.commit(a.b.keychain_authorize(a.wallet, a.next_nonce(), extra, expires_at=start + 3))
    sync(clock, h, follower, node, start + 2.2)
    assert await node.submit(a.b.account_data(pb.ACCOUNT_FIELD_BIO, "x")) == [""]  # a block opens at start + 2
    clock.advance(1.5)  # the key expired on the wall clock, not at the open block's time
    assert await node.submit(a.b.signer_add(extra, a.next_nonce(), key=Ed25519Key.generate())) == [""]
    out = await cut(node, follower)
    assert len(out.applied) == 2
    assert await node.submit(a.b.signer_add(extra, a.next_nonce(), key=Ed25519Key.generate())) == [
        "CUSTODY_KEY_EXPIRED"
    ]


async def test_quota_is_counted_at_the_time_of_the_block_that_commits_it(chains) -> None:
    h, clock, node, follower, actors = chains
    grant = h.commit(h.authority.b.storage_grant(actors[0].address, 1)).applied[0].message
    stored = h.state().grant(actors[0].address, bytes(grant.hash))
    assert stored is not None
    end = stored.expires_at
    # every other grant of the account ends no later: at `end` the account has no storage
    assert all(
        g.expires_at <= end
        for g in (h.state().grant(actors[0].address, i) for i in h.state().grant_index(actors[0].address).grant_ids)
        if g is not None
    )
    sync(clock, h, follower, node, end - 1 + 0.5)
    a = actors[0]
    assert await node.submit(a.b.follow(b"\x01" * 20)) == [""]  # a block opens at end - 1
    clock.advance(1)
    assert await node.submit(a.b.follow(b"\x02" * 20)) == [""]  # the grant still holds at the block's time
    out = await cut(node, follower)
    assert len(out.applied) == 2
    assert await node.submit(a.b.follow(b"\x03" * 20)) == ["NO_STORAGE"]


@pytest.mark.parametrize("field", ["number", "first_event_id", "timestamp_ms"])
async def test_a_block_executed_in_another_context_than_it_is_sealed_with_is_caught(chains, field: str) -> None:
    """The comparison can fail: executing the open block's messages with a context other than the one its
    header carries (number, event ids, time) gives records a follower does not reproduce."""
    h, clock, node, follower, actors = chains
    a = actors[0]
    short = Secp256k1Key.generate()  # a custody key that expired 2 s before the block's true time
    h.commit(a.b.keychain_authorize(a.wallet, a.next_nonce(), short, expires_at=h.now + 1))
    sync(clock, h, follower, node, h.now + 3)
    assert await node.submit(a.b.follow(b"\x01" * 20)) == [""]
    pending = node.pipeline._pending
    assert isinstance(pending, PendingBlocks)
    block = pending.blocks[0]
    true_value = getattr(block, field)
    setattr(block, field, true_value + (-5000 if field == "timestamp_ms" else 1))
    if field == "timestamp_ms":  # executed 5 s early the key still holds
        late = a.b.signer_add(short, a.next_nonce(), key=Ed25519Key.generate())
    else:
        late = a.b.follow(b"\x02" * 20)
    assert await node.submit(late) == [""]
    setattr(block, field, true_value)
    out = await node.orderer.produce()
    with pytest.raises((AssertionError, InvalidBlock)):
        assert_same_block(out, follower.replay(out.block))


async def test_the_producer_closes_a_block_at_its_byte_cap(chains, monkeypatch: pytest.MonkeyPatch) -> None:
    """Blocks have no byte limit as a rule, but the producer closes one before its messages pass
    MAX_BLOCK_BYTES (so every block fits the 64 MiB a follower or stream accepts): with a cap of 3.5
    messages, 7 messages make blocks of 3, 3 and 1, each equal to a follower's replay."""
    _, _, node, follower, actors = chains
    msgs = [actors[0].b.follow(bytes([i]) * 20) for i in range(1, 8)]
    sizes = [m.ByteSize() for m in msgs]
    cap = 3 * max(sizes) + min(sizes) // 2
    assert cap < 4 * min(sizes)
    monkeypatch.setattr("node.server.write.pending.MAX_BLOCK_BYTES", cap)
    node.pipeline.rebuild()
    assert await node.submit(*msgs) == [""] * 7
    assert node.open_blocks == 3
    outs = [await cut(node, follower) for _ in range(3)]
    assert [len(o.applied) for o in outs] == [3, 3, 1]
    assert [r.message.hash for o in outs for r in o.applied] == [m.hash for m in msgs]


def test_a_block_built_from_the_mempool_stops_at_the_byte_cap(chains) -> None:
    """The other producer path (a block built from the mempool's oldest messages): the same cap, in order,
    and a message alone over the cap still gets a block of its own."""
    _, _, node, _, actors = chains
    msgs = [actors[0].b.follow(bytes([i]) * 20) for i in range(1, 8)]
    sizes = [m.ByteSize() for m in msgs]
    node.mempool.add_validated({bytes(m.hash): m for m in msgs})
    taken = node.mempool.take(max_bytes=3 * max(sizes) + min(sizes) // 2)
    assert [m.hash for m in taken] == [m.hash for m in msgs[:3]]
    assert [m.hash for m in node.mempool.take(max_bytes=1)] == [msgs[0].hash]
