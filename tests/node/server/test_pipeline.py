"""The write path in process: pending effects, rebasing after a block, rebuilding after a drop."""

from __future__ import annotations

import asyncio

import pytest

from chain.v1 import message_pb2 as pb
from node.errors import MessageRejected, Reason
from node.server.events import EventHub
from node.server.ordering.orderer import SoloOrderer
from node.server.write.mempool import Mempool
from node.server.write.pipeline import Pipeline
from node.server.write.verify import Verifier
from tests.harness import Harness, commit_meta


@pytest.fixture
def stack(tmp_path):
    h = Harness(tmp_path / "chain")
    clock = lambda: float(h.now)  # noqa: E731
    mempool = Mempool(1000)
    verifier = Verifier(0, 256 * 1024)
    pipeline = Pipeline(h.chain, mempool, verifier, clock=clock)
    orderer = SoloOrderer(
        h.chain, mempool, pipeline, EventHub(100), block_interval=1, empty_block_interval=10, clock=clock
    )
    yield h, mempool, pipeline, orderer
    pipeline.close()
    verifier.close()


async def test_dependent_messages_validate_against_pending_effects(stack):
    h, mempool, pipeline, orderer = stack
    alice = h.actor()
    pid = h.commit(alice.b.project_create("p")).applied[0].message.hash
    pipeline.rebuild()
    c1, c2 = commit_meta(1), commit_meta(2)
    c2.parents.append(c1.hash)
    first = await pipeline.submit(
        [alice.b.commit_bundle(pid, [c1]), alice.b.ref_update(pid, b"refs/heads/m", c1.hash, 1)]
    )
    assert [o.accepted for o in first] == [True, True]  # the ref sees the pending commit
    conflicting = await pipeline.submit([alice.b.ref_update(pid, b"refs/heads/m", c1.hash, 1, timestamp=h.now + 1)])
    assert conflicting[0].reason == "REF_NONCE_MISMATCH"  # the pending update already took nonce 1
    out = await orderer.produce()
    assert len(out.applied) == 2 and not len(mempool)
    # after the block (a prefix of the mempool) pending state was rebased: nonce 2 follows the committed nonce 1
    later = await pipeline.submit(
        [alice.b.commit_bundle(pid, [c2]), alice.b.ref_update(pid, b"refs/heads/m", c2.hash, 2, old_hash=c1.hash)]
    )
    assert [o.accepted for o in later] == [True, True]
    assert len(mempool) == 2
    h.now += 1
    await orderer.produce()
    assert h.state().ref(pid, b"refs/heads/m").hash == c2.hash


async def test_a_dropped_message_forces_revalidation_of_the_rest(stack):
    h, mempool, pipeline, orderer = stack
    alice = h.actor()
    pipeline.rebuild()
    # a pending write goes stale when a newer write of the same field commits behind the pipeline's back
    stale = alice.b.account_data(pb.ACCOUNT_FIELD_BIO, "old", timestamp=h.now)
    assert (await pipeline.submit([stale]))[0].accepted
    h.commit(alice.b.account_data(pb.ACCOUNT_FIELD_BIO, "newer", timestamp=h.now + 5))  # committed behind its back
    follow_up = alice.b.account_data(pb.ACCOUNT_FIELD_WEBSITE, "https://x.test")
    assert (await pipeline.submit([follow_up]))[0].accepted
    out = await orderer.produce()
    assert [d.error.reason.value for d in out.dropped] == ["STALE_UPDATE"]
    assert [r.message.hash for r in out.applied] == [follow_up.hash]
    record = pipeline.dropped.get(bytes(stale.hash))
    assert record is not None and record.reason == "STALE_UPDATE"
    assert not len(mempool)


async def test_a_batch_past_the_mempool_room_admits_what_fits_and_counts_it(tmp_path):
    h = Harness(tmp_path / "chain")
    mempool = Mempool(3)
    verifier = Verifier(0, 256 * 1024)
    pipeline = Pipeline(h.chain, mempool, verifier, clock=lambda: float(h.now))
    try:
        alice = h.actor()
        pipeline.rebuild()  # onto the committed state that knows alice
        follows = [alice.b.follow(bytes([i]) * 20) for i in range(4)]
        out = await pipeline.submit([*follows[:2], follows[0], *follows[2:]])
        assert [(o.accepted, o.reason) for o in out] == [
            (True, ""),
            (True, ""),
            (False, "DUPLICATE_MESSAGE"),
            (True, ""),
            (False, "MEMPOOL_FULL"),
        ]
        assert [m.hash for m in mempool.messages()] == [m.hash for m in follows[:3]]
        assert mempool.counts() == {int(pb.MESSAGE_TYPE_LINK_ADD): 3}
        # the bulk add keeps add's refusals for a caller that did not check
        with pytest.raises(MessageRejected) as full:
            mempool.add_validated({follows[3].hash: follows[3]})
        assert full.value.reason is Reason.MEMPOOL_FULL
        mempool.remove([follows[2].hash])
        with pytest.raises(MessageRejected) as dup:
            mempool.add_validated({follows[0].hash: follows[0]})
        assert dup.value.reason is Reason.DUPLICATE_MESSAGE
        assert len(mempool) == 2 and mempool.counts() == {int(pb.MESSAGE_TYPE_LINK_ADD): 2}
    finally:
        pipeline.close()
        verifier.close()


async def test_held_messages_are_not_executed_and_a_block_from_elsewhere_keeps_them(stack):
    """A member that forwards (`hold`) keeps what passes the stateless checks without executing it: a message
    this member's state would refuse (its signer is not known here yet) is held for the upstream's verdict,
    and a block ordered elsewhere moves the pending state on without validating it again."""
    h, mempool, pipeline, _ = stack
    alice = h.actor()
    pipeline.rebuild()
    stranger = h.actor(units=0, register=False)  # not known here: UNKNOWN_SIGNER on this member's state
    unknown_here = stranger.b.follow(bytes(20))
    known = alice.b.follow(bytes(19) + b"\x01")
    assert not (await pipeline.dry_run(unknown_here)).accepted
    out = await pipeline.hold([unknown_here, known])
    assert [o.accepted for o in out] == [True, True]
    assert [m.hash for m in mempool.messages()] == [unknown_here.hash, known.hash]
    # stateless refusals stay final here: a repeat, a wrong network, a future time
    again = await pipeline.hold([known, alice.b.follow(bytes(20), timestamp=h.now + 3600)])
    assert [o.reason for o in again] == ["DUPLICATE_MESSAGE", "FUTURE_TIMESTAMP"]
    # the leader committed `known` (and not the other yet): the applier takes it out of the mempool
    block = h.commit(known)
    mempool.remove([bytes(known.hash)])
    pipeline.after_block([bytes(known.hash)], block.dropped, block.block.header.number, block.block)
    assert unknown_here.hash in mempool and pipeline.dropped.get(bytes(unknown_here.hash)) is None
    # a message already committed is refused here (it would sit in the mempool as pending upstream)
    assert [o.reason for o in await pipeline.hold([known])] == ["DUPLICATE_MESSAGE"]


async def test_a_member_that_takes_the_lead_validates_what_it_held_first(stack):
    """What a member held while it forwarded is pending before its first admission as the one that orders:
    a commit into a project whose creation it held is accepted, and the block holds both, in order."""
    h, mempool, pipeline, orderer = stack
    alice = h.actor(units=2)
    pipeline.rebuild()
    create = alice.b.project_create("held")
    assert [o.accepted for o in await pipeline.hold([create])] == [True]
    assert not (await pipeline.dry_run(alice.b.commit_bundle(create.hash, [commit_meta(7)]))).accepted
    bundle = alice.b.commit_bundle(create.hash, [commit_meta(8)])
    (outcome,) = await pipeline.submit([bundle])
    assert outcome.accepted, outcome
    out = await orderer.produce()
    assert [r.message.hash for r in out.applied] == [create.hash, bundle.hash]
    assert not len(mempool)


class GatedVerifier:
    """The pipeline's verifier, held at a gate: a block can be committed while a batch is being verified."""

    def __init__(self, inner: Verifier) -> None:
        self.inner = inner
        self.waiting = asyncio.Event()
        self.gate = asyncio.Event()

    async def verify(self, msgs):
        self.waiting.set()
        await self.gate.wait()
        return await self.inner.verify(msgs)


async def test_a_block_committed_while_a_batch_is_verified_does_not_lose_its_admission(stack):
    """Admission goes into the pending state as it is after verification (the await), not as it was when the
    batch arrived: a block committed meanwhile replaced it, and a message admitted into the replaced one would
    never be sealed."""
    h, mempool, pipeline, orderer = stack
    alice = h.actor()
    pipeline.rebuild()
    first, second = alice.b.follow(bytes(20)), alice.b.follow(bytes(19) + b"\x02")
    assert (await pipeline.submit([first]))[0].accepted
    gated = GatedVerifier(pipeline.verifier)
    pipeline.verifier = gated
    task = asyncio.create_task(pipeline.submit([second]))
    await gated.waiting.wait()
    out = await orderer.produce()  # commits `first`: the pending state moves on
    assert [r.message.hash for r in out.applied] == [first.hash]
    gated.gate.set()
    (outcome,) = await task
    assert outcome.accepted, outcome
    h.now += 1
    out = await orderer.produce()
    assert [r.message.hash for r in out.applied] == [second.hash]
    assert not len(mempool)
