"""Forwarding writes upstream, with a real upstream node and a local chain that is behind it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest

from chain.v1 import message_pb2 as pb
from chain.v1 import rpc_pb2, service_pb2_grpc
from node.chain import Chain
from node.errors import MessageRejected, Reason
from node.server.snapshots import restore
from node.server.write.forwarding import Forwarder
from node.server.write.membership import MemberProof
from node.server.write.mempool import Mempool
from node.server.write.pipeline import Pipeline
from node.server.write.verify import Verifier
from tests.fixtures.actors import authority_builder
from tests.fixtures.certs import TestCA
from tests.fixtures.nodeproc import NodeProcess, NodeTLSFiles
from tests.fixtures.procs import free_port
from tests.fixtures.replicaset import ENV, funded_actors, wait_bootstrapped
from tests.harness import Harness


async def test_state_rejections_defer_to_upstream_and_envelope_ones_do_not(tmp_path: Path) -> None:
    upstream = NodeProcess(tmp_path / "up", "--verify-workers", "0", env=ENV).start()
    chain: Chain | None = None
    try:
        with upstream.client() as c:
            wait_bootstrapped(c, upstream.authority())
            snap = c.admin.CreateSnapshot(rpc_pb2.CreateSnapshotRequest()).snapshot  # type: ignore[union-attr]
            actor = funded_actors(c, upstream.authority(), 1)[0]  # after the snapshot: unknown to the local copy
        restore(tmp_path / "up" / "snapshots" / snap.name, tmp_path / "local")
        chain = Chain.open(tmp_path / "local")
        mempool = Mempool(100)
        verifier = Verifier(0, 262144)
        pipeline = Pipeline(chain, mempool, verifier)
        fwd = Forwarder(pipeline, mempool, max_batch=100)
        try:
            behind = actor.b.project_create("made-while-behind")
            assert not (await pipeline.dry_run(behind)).accepted  # UNKNOWN_SIGNER here...
            (outcome,) = await fwd.submit([behind], upstream.grpc_target)
            assert outcome.accepted  # ...but upstream, which knows the signer, accepts it
            assert behind.hash in mempool  # held, not executed here: kept (re-forwarded if need be)

            forged = actor.b.project_create("forged")
            forged.signature = bytes(64)
            (outcome,) = await fwd.submit([forged], upstream.grpc_target)
            assert not outcome.accepted and outcome.reason == Reason.INVALID_SIGNATURE.value

            grant = authority_builder(upstream.authority()).storage_grant(bytes(20), 1)
            (outcome,) = await fwd.submit([grant], upstream.grpc_target)
            assert outcome.accepted and grant.hash in mempool  # valid here: kept (re-forwarded if need be)

            with upstream.client() as c:
                c.wait_committed(bytes(behind.hash))
                c.wait_committed(bytes(grant.hash))
            assert upstream.stop() == 0
            late = authority_builder(upstream.authority()).storage_grant(bytes(19) + b"\x01", 1)
            with pytest.raises(MessageRejected) as info:
                await fwd.submit([late], upstream.grpc_target)
            assert info.value.reason == Reason.NOT_LEADER and info.value.values["retry_after_ms"] > 0
            assert late.hash not in mempool  # withdrawn: the client was told to retry
        finally:
            await fwd.close()
            pipeline.close()
            verifier.close()
    finally:
        if chain is not None:
            chain.close()
        upstream.stop()


async def test_forwarded_batches_carry_the_member_proof(tmp_path: Path) -> None:
    """A member's forwards carry its proof: the upstream takes them as verified only with the right secret."""
    secret = b"forwarding-test-secret-0123456789"
    (tmp_path / "secret").write_bytes(secret)
    files = NodeTLSFiles.issue(TestCA.make(tmp_path / "pki"), "up")  # the proof counts only over mutual TLS
    upstream = NodeProcess(
        tmp_path / "up", "--verify-workers", "0", "--cluster-secret-file", str(tmp_path / "secret"), env=ENV, tls=files
    ).start()
    chain: Chain | None = None
    try:
        with upstream.client() as c:
            wait_bootstrapped(c, upstream.authority())
            actor = funded_actors(c, upstream.authority(), 1)[0]
            snap = c.admin.CreateSnapshot(rpc_pb2.CreateSnapshotRequest()).snapshot  # type: ignore[union-attr]
        restore(tmp_path / "up" / "snapshots" / snap.name, tmp_path / "local")
        chain = Chain.open(tmp_path / "local")
        mempool = Mempool(100)
        verifier = Verifier(0, 262144)
        pipeline = Pipeline(chain, mempool, verifier)
        # a batch this member took as vouched for (it came with a member's proof) is forwarded with its own
        # proof; a forged signature shows which side verified: only a trusting upstream accepts it
        outcomes = {}
        for name, proof in (("wrong", MemberProof(b"some-other-secret-0123456789")), ("member", MemberProof(secret))):
            fwd = Forwarder(pipeline, mempool, max_batch=100, proof=proof, tls=files.client_tls())
            try:
                forged = actor.b.follow(bytes(20))
                forged.signature = bytes(64)
                (outcomes[name],) = await fwd.submit([forged], upstream.internal_target, vouched=True)
            finally:
                await fwd.close()
        assert not outcomes["wrong"].accepted and outcomes["wrong"].reason == Reason.INVALID_SIGNATURE.value
        assert outcomes["member"].accepted, outcomes["member"]
        pipeline.close()
        verifier.close()
    finally:
        if chain is not None:
            chain.close()
        upstream.stop()


async def test_not_leader_only_while_nothing_left_this_member(tmp_path: Path) -> None:
    """Nothing listens at the upstream's address: nothing is sent, the message is withdrawn, NOT_LEADER. But a
    member that took the lead while it waited (it validated what it holds into its pending state: the
    election can make it leader at any moment) may commit the message itself: OUTCOME_UNKNOWN, the message
    kept pending. Without the `_taken` check the second answer is NOT_LEADER for a message about to commit."""
    h = Harness(tmp_path / "chain")
    mempool = Mempool(100)
    verifier = Verifier(0, 262144)
    pipeline = Pipeline(h.chain, mempool, verifier, clock=h.clock)
    fwd = Forwarder(pipeline, mempool, max_batch=100, connect_timeout=0.5)
    nowhere = f"127.0.0.1:{free_port()}"
    alice = h.actor()
    try:
        first = alice.b.follow(bytes(20))
        with pytest.raises(MessageRejected) as info:
            await fwd.submit([first], nowhere)
        assert info.value.reason == Reason.NOT_LEADER and "cannot be reached" in info.value.detail
        assert first.hash not in mempool

        async def take_the_lead() -> None:
            await asyncio.sleep(0.1)
            pipeline.rebuild()  # what a member elected leader does before its first seal

        second = alice.b.follow(b"\x01" * 20)
        lead = asyncio.create_task(take_the_lead())
        with pytest.raises(MessageRejected) as info:
            await fwd.submit([second], nowhere)
        await lead
        assert info.value.reason == Reason.OUTCOME_UNKNOWN and info.value.values["hashes"] == [second.hash.hex()]
        assert second.hash in mempool and pipeline.validated([bytes(second.hash)])
    finally:
        await fwd.close()
        pipeline.close()
        verifier.close()


class Upstream(service_pb2_grpc.ChainServiceServicer):
    """A leader that answers BatchSubmitMessages as it is told: a whole-call refusal, or a verdict per message."""

    def __init__(self) -> None:
        self.refusal: tuple[grpc.StatusCode, str] | None = None  # (status, reason-code)
        self.verdict = ""  # reason code for every message ("" accepts)
        self.meanwhile: Callable[[Sequence[pb.Message]], object] | None = None  # runs before it answers
        self.delay = 0.0  # seconds it thinks before it answers

    async def BatchSubmitMessages(
        self, request: rpc_pb2.BatchSubmitMessagesRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> rpc_pb2.BatchSubmitMessagesResponse:
        if self.meanwhile is not None:
            self.meanwhile(request.messages)
        await asyncio.sleep(self.delay)
        if self.refusal is not None:
            status, reason = self.refusal
            await context.abort(status, f"{reason}: told so", (("reason-code", reason),))
        results = [
            rpc_pb2.SubmitResult(index=i, hash=m.hash, accepted=not self.verdict, reason_code=self.verdict)
            for i, m in enumerate(request.messages)
        ]
        return rpc_pb2.BatchSubmitMessagesResponse(results=results)


@dataclass
class Forwarding:
    """A Forwarder on a real chain whose upstream is an `Upstream` served on a loopback port."""

    upstream: Upstream
    target: str
    h: Harness
    mempool: Mempool
    pipeline: Pipeline
    fwd: Forwarder


@asynccontextmanager
async def forwarding_to_upstream(tmp_path: Path, *, reforward_age: float = 5.0) -> AsyncIterator[Forwarding]:
    upstream = Upstream()  # type: ignore[abstract]  # BatchSubmitMessages only
    server = grpc.aio.server()
    service_pb2_grpc.add_ChainServiceServicer_to_server(upstream, server)
    target = f"127.0.0.1:{server.add_insecure_port('127.0.0.1:0')}"
    await server.start()
    h = Harness(tmp_path / "chain")
    mempool = Mempool(100)
    verifier = Verifier(0, 262144)
    pipeline = Pipeline(h.chain, mempool, verifier, clock=h.clock)
    fwd = Forwarder(pipeline, mempool, max_batch=100, reforward_age=reforward_age, clock=h.clock)
    try:
        yield Forwarding(upstream, target, h, mempool, pipeline, fwd)
    finally:
        await fwd.close()
        await server.stop(None)
        pipeline.close()
        verifier.close()


async def test_the_leaders_word_decides_and_a_refused_reforward_is_recorded_as_dropped(tmp_path: Path) -> None:
    """A whole-call refusal the leader gives before admitting anything (DRAINING) is NOT_LEADER and the message
    is withdrawn; any other failure of a call that went out (INTERNAL: the leader's admission may have run) is
    OUTCOME_UNKNOWN and the message stays pending; re-forwarded, the leader refuses it (NAME_TAKEN): it is
    recorded as dropped with that reason, which GetMessage answers. Each fails with its gate removed
    (NOT_ADMITTED, the `dropped` record of a re-forward)."""
    async with forwarding_to_upstream(tmp_path, reforward_age=0) as f:
        upstream, target, h, mempool, pipeline, fwd = f.upstream, f.target, f.h, f.mempool, f.pipeline, f.fwd
        alice = h.actor()
        upstream.refusal = (grpc.StatusCode.UNAVAILABLE, Reason.DRAINING.value)
        refused = alice.b.follow(bytes(20))
        with pytest.raises(MessageRejected) as info:
            await fwd.submit([refused], target)
        assert info.value.reason == Reason.NOT_LEADER and "DRAINING" in info.value.detail
        assert refused.hash not in mempool

        upstream.refusal = (grpc.StatusCode.INTERNAL, Reason.INTERNAL.value)
        unknown = alice.b.follow(b"\x02" * 20)
        with pytest.raises(MessageRejected) as info:
            await fwd.submit([unknown], target)
        assert info.value.reason == Reason.OUTCOME_UNKNOWN and unknown.hash in mempool

        upstream.refusal, upstream.verdict = None, Reason.NAME_TAKEN.value
        assert await fwd.reforward(target) == 1
        record = pipeline.dropped.get(bytes(unknown.hash))
        assert record is not None and record.reason == "NAME_TAKEN" and record.height == h.chain.height
        assert unknown.hash not in mempool


async def test_what_this_member_committed_meanwhile_is_accepted_not_unknown(tmp_path: Path) -> None:
    """The leader's answer is lost (INTERNAL after sending; a refusal once this member took the messages), but
    by then this member has committed the message itself (the block reached it first): the outcome is known,
    accepted. In a batch, OUTCOME_UNKNOWN names only the hashes its store does not hold. Fails without the
    store lookup (`_known_here`)."""
    async with forwarding_to_upstream(tmp_path) as f:
        upstream, target, h, mempool, fwd = f.upstream, f.target, f.h, f.mempool, f.fwd
        alice = h.actor()

        def commit_first(msgs: Sequence[pb.Message]) -> None:  # the leader's block, applied here before the answer
            h.commit(msgs[0])
            mempool.remove([bytes(msgs[0].hash)])  # as applying a block does

        upstream.meanwhile = commit_first
        upstream.refusal = (grpc.StatusCode.INTERNAL, Reason.INTERNAL.value)
        first = alice.b.follow(b"\x03" * 20)
        (outcome,) = await fwd.submit([first], target)
        assert outcome.accepted and outcome.hash == first.hash

        upstream.refusal = (grpc.StatusCode.UNAVAILABLE, Reason.DRAINING.value)  # taken out of the mempool here
        second = alice.b.follow(b"\x04" * 20)
        (outcome,) = await fwd.submit([second], target)
        assert outcome.accepted and outcome.hash == second.hash

        upstream.refusal = (grpc.StatusCode.INTERNAL, Reason.INTERNAL.value)
        done, pending = alice.b.follow(b"\x05" * 20), alice.b.follow(b"\x06" * 20)
        with pytest.raises(MessageRejected) as info:
            await fwd.submit([done, pending], target)
        assert info.value.reason == Reason.OUTCOME_UNKNOWN and info.value.values["hashes"] == [pending.hash.hex()]
        assert pending.hash.hex() in info.value.detail and pending.hash in mempool


async def test_a_stopping_member_waits_for_the_verdicts_on_their_way(tmp_path: Path) -> None:
    """The member stops (its orderer closes the forwarder) while a forwarded call awaits the leader's answer:
    the answer still reaches the client, accepted, not OUTCOME_UNKNOWN. Fails when `close` cancels the calls
    in flight."""
    async with forwarding_to_upstream(tmp_path) as f:
        f.upstream.delay = 0.5
        msg = f.h.actor().b.follow(b"\x07" * 20)
        call = asyncio.create_task(f.fwd.submit([msg], f.target))
        await asyncio.sleep(0.2)  # the call is out: the leader is thinking
        await f.fwd.close()
        (outcome,) = await call
        assert outcome.accepted and outcome.hash == msg.hash
