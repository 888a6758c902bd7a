"""Submissions to a member that does not order blocks: checked here, then sent to the one that does.

A follower (etcd mode) or a read replica (`--follow`) verifies each message
and checks what needs no state (structure, time, already committed or
pending here) first, keeps the ones that pass in its mempool without
executing them (pipeline.py `hold`) and forwards them with
BatchSubmitMessages to the leader (or upstream), which validates them
against its pending state: its verdict is the answer, and a message it
rejects (other than as a duplicate it already holds) is removed here again.
(Decision: no validation against a pending state here. This member's pending
state would hold only its own clients' messages and could lag the leader's
by a block or two, so its state-dependent verdicts were forwarded anyway;
executing them here, and again after every block from the leader, cost a
follower about a quarter of its CPU: docs/replication.md.) Local rejections
are final only when they do not depend on state (FINAL_HERE); the rest
(a stale timestamp) go upstream too. If the upstream cannot be reached the
messages are removed and the client gets UNAVAILABLE (`NOT_LEADER`) with a
retry hint. Messages still pending after `reforward_age` seconds are sent
again (a leader that crashed lost its mempool; a new one may not have them).

Everything forwarded passed this member's envelope and signature checks (a
verification failure is final here, FINAL_HERE), so with a cluster secret each
call carries the member proof (membership.py) and the upstream does not verify
the signatures again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import grpc

from chain.v1 import message_pb2 as pb
from chain.v1 import rpc_pb2, service_pb2_grpc
from node.errors import REASON_CODE, MessageRejected, Reason, trailer
from node.errors import RETRY_AFTER_MS as RETRY_AFTER
from node.server.write.membership import MemberProof
from node.server.write.mempool import Mempool
from node.server.write.pipeline import Outcome, Pipeline
from node.server.write.verify import VERIFY_REASONS
from node.tls import ClientTLS, aio_channel

if TYPE_CHECKING:
    from chain.v1.service_pb2_grpc import ChainServiceAsyncStub

log = logging.getLogger("chain.forwarding")
RETRY_AFTER_MS = 1000
R = Reason
# local verdicts that hold whatever the state: the upstream would say the same. Every verification
# failure is one of them, so whatever is forwarded was verified here (the member proof vouches for it).
FINAL_HERE = VERIFY_REASONS | frozenset(
    r.value
    for r in (
        R.WRONG_NETWORK, R.UNKNOWN_MESSAGE_TYPE, R.DISABLED_MESSAGE_TYPE, R.BODY_MISMATCH, R.INVALID_FIELD,
        R.FUTURE_TIMESTAMP, R.DUPLICATE_MESSAGE, R.MEMPOOL_FULL,
    )
)  # fmt: skip


def no_leader(detail: str) -> MessageRejected:
    return MessageRejected(Reason.NOT_LEADER, f"{detail}; retry shortly", retry_after_ms=RETRY_AFTER_MS)


class Forwarder:
    def __init__(
        self,
        pipeline: Pipeline,
        mempool: Mempool,
        *,
        max_batch: int,
        proof: MemberProof | None = None,
        timeout: float = 5.0,
        reforward_age: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
        tls: ClientTLS | None = None,
    ) -> None:
        """`tls`: mutual TLS to the upstream's internal listener (None: plaintext)."""
        self.pipeline = pipeline
        self.tls = tls
        self.mempool = mempool
        self.max_batch = max_batch
        self.proof = proof or MemberProof()
        self.timeout = timeout
        self.reforward_age = reforward_age
        self.clock = clock
        self._channels: dict[str, tuple[grpc.aio.Channel, ChainServiceAsyncStub]] = {}
        self._since: dict[bytes, float] = {}
        self._reforward_failing = ""  # the upstream's answer while re-forwarding fails (logged once a streak)

    def _stub(self, target: str) -> ChainServiceAsyncStub:
        if target not in self._channels:
            channel = aio_channel(target, self.tls, secure=self.tls is not None)
            stub: ChainServiceAsyncStub = service_pb2_grpc.ChainServiceStub(channel)
            self._channels[target] = (channel, stub)
        return self._channels[target][1]

    async def _send(self, target: str, msgs: Sequence[pb.Message]) -> list[rpc_pb2.SubmitResult]:
        request = rpc_pb2.BatchSubmitMessagesRequest(messages=msgs)
        metadata = self.proof.metadata(msgs)
        response = await self._stub(target).BatchSubmitMessages(request, timeout=self.timeout, metadata=metadata)
        return list(response.results)

    async def submit(self, msgs: Sequence[pb.Message], target: str, *, vouched: bool = False) -> list[Outcome]:
        outcomes = await self.pipeline.hold(msgs, vouched=vouched)
        upstream = [o for o in outcomes if o.accepted or o.reason not in FINAL_HERE]
        if not upstream:
            return outcomes
        accepted = [o.hash for o in upstream if o.accepted]
        now = self.clock()
        for h in accepted:
            self._since.setdefault(h, now)
        try:
            results = await self._send(target, [msgs[o.index] for o in upstream])
        except grpc.aio.AioRpcError as err:
            if not accepted:  # nothing was admitted here: the local verdicts stand
                return outcomes
            self._withdraw(accepted)
            if trailer(err.trailing_metadata(), REASON_CODE) == Reason.STORAGE_FAILED.value:
                # the cluster cannot commit (etcd refuses appends, the leader's store fails): the leader's word
                hint = trailer(err.trailing_metadata(), RETRY_AFTER) or RETRY_AFTER_MS
                detail = (err.details() or "").removeprefix(f"{Reason.STORAGE_FAILED.value}: ")
                raise MessageRejected(Reason.STORAGE_FAILED, detail, retry_after_ms=int(hint)) from None
            raise no_leader(f"the leader at {target} did not answer ({err.code().name})") from None
        verdicts = self._settle(accepted, [r for o, r in zip(upstream, results, strict=True) if o.accepted])
        answers = {o.index: r for o, r in zip(upstream, results, strict=True) if not o.accepted}
        out: list[Outcome] = []
        for o in outcomes:
            if o.index in answers:  # refused here for a reason that is not final: the upstream's verdict is the answer
                r = answers[o.index]
                values = o.values if r.reason_code == o.reason else {}  # SubmitResult carries no values
                out.append(Outcome(o.index, o.hash, r.accepted, r.reason_code, r.detail, values))
                continue
            v = verdicts.get(o.hash) if o.accepted else None
            if v is None:
                out.append(o)
                continue
            values = self.pipeline.values_of(msgs[o.index], v.reason)  # SubmitResult carries no values
            out.append(Outcome(o.index, o.hash, False, v.reason, v.detail, values))
        return out

    def _settle(self, hashes: Sequence[bytes], results: Sequence[rpc_pb2.SubmitResult]) -> dict[bytes, Outcome]:
        """Withdraw what the upstream refused; its verdicts, keyed by hash."""
        verdicts: dict[bytes, Outcome] = {}
        for h, r in zip(hashes, results, strict=True):
            if r.accepted or r.reason_code == Reason.DUPLICATE_MESSAGE.value:
                continue
            verdicts[h] = Outcome(0, h, False, r.reason_code, r.detail)
        if verdicts:
            self._withdraw(list(verdicts))
        return verdicts

    def _withdraw(self, hashes: list[bytes]) -> None:
        self.mempool.remove(hashes)
        for h in hashes:
            self._since.pop(h, None)
        self.pipeline.forget(hashes)

    async def reforward(self, target: str) -> int:
        """Send again what has been pending here longer than `reforward_age`; returns how many."""
        for h in [h for h in self._since if h not in self.mempool]:
            del self._since[h]
        now = self.clock()
        old = [
            m for m in self.mempool.messages() if now - self._since.setdefault(bytes(m.hash), now) >= self.reforward_age
        ]
        for i in range(0, len(old), self.max_batch):
            batch = old[i : i + self.max_batch]
            try:
                results = await self._send(target, batch)
            except grpc.aio.AioRpcError as err:  # retried every maintenance tick; said once until one goes through
                why = trailer(err.trailing_metadata(), REASON_CODE) or err.code().name
                level = logging.DEBUG if self._reforward_failing == why else logging.WARNING
                log.log(level, "re-forwarding %d messages to %s failed: %s (retrying)", len(batch), target, why)
                self._reforward_failing = why
                return i
            if self._reforward_failing:
                log.info("re-forwarding to %s goes through again", target)
                self._reforward_failing = ""
            self._settle([bytes(m.hash) for m in batch], results)
            for m in batch:
                if bytes(m.hash) in self._since:
                    self._since[bytes(m.hash)] = now
        return len(old)

    async def close(self) -> None:
        for channel, _ in self._channels.values():
            await channel.close(None)
        self._channels.clear()
