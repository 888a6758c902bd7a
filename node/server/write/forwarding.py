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
(a stale timestamp) go upstream too.

What the client is told when the upstream gives no verdict is only what this member knows:

- nothing was sent (no connection to the upstream within `connect_timeout`), or the upstream refused the
  whole call before admitting anything (its own NOT_LEADER, DRAINING, STATE_DIVERGED, ...: NOT_ADMITTED),
  and this member did not take the messages beyond holding them meanwhile (it may have been elected while
  it waited, and validated them into its own pending state: `_taken`): the messages are removed here and
  the client gets UNAVAILABLE, `NOT_LEADER`, with a retry hint (the upstream's STORAGE_FAILED is passed on
  as it is). Not admitted anywhere: safe to send again.
- the call went out and no trustworthy answer came back (a timeout: the leader frozen or partitioned; the
  connection lost after sending; any other failure): the upstream may have admitted them, and a leader
  elected meanwhile may commit them. The client gets DEADLINE_EXCEEDED, `OUTCOME_UNKNOWN`, with the hashes
  sent (`reason-values` `hashes`) and no retry hint: look each one up (GetMessage) before sending anything
  else. The messages stay pending here and are re-forwarded like any other, so each ends up committed or
  refused, and a refusal is recorded as a drop (GetMessage: MESSAGE_DROPPED).
- either way, a message this member has already committed itself by the time it answers (its record is in
  this member's store, where GetMessage finds it) has a known outcome: it is answered as accepted, and
  OUTCOME_UNKNOWN names only the hashes not found there (none left: no error).

Messages still pending after `reforward_age` seconds are sent again (a leader that crashed lost its
mempool; a new one may not have them). A re-forwarded message the upstream refuses was admitted here
before: it is removed and recorded as dropped, with the upstream's reason and this member's applied
height (dropped.py).

Everything forwarded passed this member's envelope and signature checks (a
verification failure is final here, FINAL_HERE), so with a cluster secret each
call carries the member proof (membership.py) and the upstream does not verify
the signatures again.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import grpc

from chain.v1 import message_pb2 as pb
from chain.v1 import rpc_pb2, service_pb2_grpc
from node.errors import REASON_CODE, ChainError, MessageRejected, Reason, trailer
from node.errors import RETRY_AFTER_MS as RETRY_AFTER
from node.server.write.membership import MemberProof
from node.server.write.mempool import Mempool
from node.server.write.pipeline import Outcome, Pipeline
from node.server.write.verify import VERIFY_REASONS
from node.storage import schema
from node.tls import ClientTLS, aio_channel

if TYPE_CHECKING:
    from chain.v1.service_pb2_grpc import ChainServiceAsyncStub

log = logging.getLogger("chain.forwarding")
RETRY_AFTER_MS = 1000
CONNECT_TIMEOUT = 1.0  # seconds a forward waits for a connection to the upstream before nothing is sent
# reconnect quickly to a leader that restarted (gRPC's own backoff grows to two minutes)
CHANNEL_OPTIONS = (("grpc.initial_reconnect_backoff_ms", 200), ("grpc.max_reconnect_backoff_ms", 1000))
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


# whole-call refusals an upstream answers before it admits anything: nothing of the call was admitted there
NOT_ADMITTED = frozenset(
    r.value
    for r in (
        R.NOT_LEADER, R.DRAINING, R.STATE_DIVERGED, R.BATCH_TOO_LARGE, R.MALFORMED_MESSAGE, R.UNAUTHENTICATED,
        R.PERMISSION_DENIED,
    )
)  # fmt: skip


def no_leader(detail: str) -> MessageRejected:
    """NOT_LEADER: no leader took the messages and none was sent one (safe to send again)."""
    return MessageRejected(Reason.NOT_LEADER, f"{detail}; retry shortly", retry_after_ms=RETRY_AFTER_MS)


def stopping() -> MessageRejected:
    """DRAINING: this member is stopping and takes no more writes; another member (or this one, back) will."""
    return MessageRejected(
        Reason.DRAINING, "this member is stopping; send the messages again", retry_after_ms=RETRY_AFTER_MS
    )


def outcome_unknown(detail: str, hashes: Sequence[bytes]) -> MessageRejected:
    """OUTCOME_UNKNOWN: the messages were sent to the leader and no answer came that says what became of them."""
    which = f"message {hashes[0].hex()}" if len(hashes) == 1 else f"each of the {len(hashes)} messages (`hashes`)"
    return MessageRejected(
        Reason.OUTCOME_UNKNOWN,
        f"{detail}: it may still commit; look {which} up (GetMessage) before sending anything else",
        hashes=[h.hex() for h in hashes],
    )


class Forwarder:
    def __init__(
        self,
        pipeline: Pipeline,
        mempool: Mempool,
        *,
        max_batch: int,
        proof: MemberProof | None = None,
        timeout: float = 5.0,
        connect_timeout: float = CONNECT_TIMEOUT,
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
        self.connect_timeout = connect_timeout
        self.reforward_age = reforward_age
        self.clock = clock
        self._channels: dict[str, tuple[grpc.aio.Channel, ChainServiceAsyncStub]] = {}
        self._since: dict[bytes, float] = {}
        self._reforward_failing = ""  # the upstream's answer while re-forwarding fails (logged once a streak)

    def _stub(self, target: str) -> ChainServiceAsyncStub:
        if target not in self._channels:
            channel = aio_channel(target, self.tls, CHANNEL_OPTIONS, secure=self.tls is not None)
            stub: ChainServiceAsyncStub = service_pb2_grpc.ChainServiceStub(channel)
            self._channels[target] = (channel, stub)
        return self._channels[target][1]

    async def _connected(self, target: str) -> bool:
        """Is there a connection to `target` (a call made now goes out on it)? Waits up to `connect_timeout`
        for one; False: a call would not be sent."""
        self._stub(target)
        channel = self._channels[target][0]
        if channel.get_state(try_to_connect=True) == grpc.ChannelConnectivity.READY:
            return True
        try:
            await asyncio.wait_for(channel.channel_ready(), self.connect_timeout)
        except TimeoutError:
            return False
        return True

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
        refusal: MessageRejected | None = None
        silent = ""  # the call went out and no answer says what became of the messages: they stay pending here
        if not await self._connected(target):  # nothing is sent: not admitted anywhere
            refusal = no_leader(f"the leader at {target} cannot be reached")
        else:
            try:
                results = await self._send(target, [msgs[o.index] for o in upstream])
            except grpc.aio.AioRpcError as err:
                refusal = self._refusal(target, err)
                if refusal is None:
                    silent = f"the leader at {target} gave no answer ({err.code().name}) after the messages were sent"
        if silent:
            return self._known_here(outcomes, upstream, silent)
        if refusal is not None:
            if not accepted:  # nothing was admitted here: the local verdicts stand
                return outcomes
            if self._taken(accepted):  # this member took the lead meanwhile: it may commit them (or did)
                why = "this member took the lead while it forwarded the messages"
                return self._known_here(outcomes, upstream, why)
            self._withdraw(accepted)  # no await since the check: they cannot be sealed here any more
            raise refusal
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

    def _known_here(self, outcomes: Sequence[Outcome], upstream: Sequence[Outcome], why: str) -> list[Outcome]:
        """The answer when the leader's verdict on `upstream` is not known: the ones this member has committed
        itself are accepted; OUTCOME_UNKNOWN (raised) names the rest."""
        committed = self._committed([o.hash for o in upstream])
        unknown = [o.hash for o in upstream if o.hash not in committed]
        if unknown:
            raise outcome_unknown(why, unknown)
        return [Outcome(o.index, o.hash, True) if o.hash in committed else o for o in outcomes]

    def _committed(self, hashes: Sequence[bytes]) -> set[bytes]:
        """Which of `hashes` this member's store holds as committed (GetMessage's record; one read)."""
        try:
            with self.pipeline.chain.read() as (view, _nodes):
                return {h for h in hashes if view.get(schema.message_key(h)) is not None}
        except ChainError as exc:  # a store that fails to read: the outcome stays unknown
            log.warning("looking up forwarded messages failed: %s", exc)
            return set()

    def _taken(self, hashes: Sequence[bytes]) -> bool:
        """Did this member take any of the messages it holds (`hashes`) beyond holding them: into its pending
        state (it took the lead and may seal them) or out of its mempool (a block committed them, or its
        pending state dropped them)? Then "not admitted anywhere" is no longer known."""
        return any(h not in self.mempool for h in hashes) or self.pipeline.validated(hashes)

    @staticmethod
    def _refusal(target: str, err: grpc.aio.AioRpcError) -> MessageRejected | None:
        """What to tell the client when the upstream refused the whole call before admitting anything (its
        reason says so: NOT_ADMITTED, STORAGE_FAILED); None when the failure says nothing of the outcome."""
        reason = trailer(err.trailing_metadata(), REASON_CODE)
        detail = (err.details() or "").removeprefix(f"{reason}: ")
        if reason == Reason.STORAGE_FAILED.value:
            # the cluster cannot commit (etcd refuses appends, the leader's store fails): the leader's word
            hint = trailer(err.trailing_metadata(), RETRY_AFTER) or RETRY_AFTER_MS
            return MessageRejected(Reason.STORAGE_FAILED, detail, retry_after_ms=int(hint))
        if reason in NOT_ADMITTED:
            return no_leader(f"the leader at {target} refused the call ({reason}: {detail})")
        return None

    def _settle(
        self, hashes: Sequence[bytes], results: Sequence[rpc_pb2.SubmitResult], *, dropped: bool = False
    ) -> dict[bytes, Outcome]:
        """Withdraw what the upstream refused; its verdicts, keyed by hash. `dropped`: the refused ones had
        been admitted here before (re-forwarded): recorded as dropped, with the reason (dropped.py)."""
        verdicts: dict[bytes, Outcome] = {}
        for h, r in zip(hashes, results, strict=True):
            if r.accepted or r.reason_code == Reason.DUPLICATE_MESSAGE.value:
                continue
            verdicts[h] = Outcome(0, h, False, r.reason_code, r.detail)
        if verdicts:
            self._withdraw(list(verdicts))
            if dropped:
                height = self.pipeline.chain.height
                for h, v in verdicts.items():
                    self.pipeline.dropped.record(h, v.reason, f"refused when forwarded again: {v.detail}", height)
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
            self._settle([bytes(m.hash) for m in batch], results, dropped=True)
            for m in batch:
                if bytes(m.hash) in self._since:
                    self._since[bytes(m.hash)] = now
        return len(old)

    async def close(self) -> None:
        """Close the channels once the calls in flight on them are answered (each within its own deadline,
        `timeout`): a call cut here would leave its client with OUTCOME_UNKNOWN for a verdict on its way."""
        channels = [channel for channel, _ in self._channels.values()]
        self._channels.clear()
        await asyncio.gather(*(channel.close(self.timeout) for channel in channels))
