"""The write path: verify -> validate against committed state plus pending effects -> mempool.

Validation runs every candidate through the real state transition on the
pending state (pending.py) that sits on a read snapshot of the committed
state and already holds the effects of every message in the mempool, so a
message that depends on a pending one (a ref update after its commit bundle)
is accepted, and two conflicting ones are not both admitted. The pending
state is a stack of open blocks with fixed contexts, so the orderer commits
the oldest one as it is (`sealer`) instead of executing its messages again.
After each block the pending state moves onto the new committed state: as it
is when the block was the oldest open one, else rebuilt from the messages
still pending (or, after a block ordered elsewhere that committed the oldest
pending messages, kept as one flat overlay: pending.py).

A member that does not order blocks (a follower, a read replica: forwarding.py) holds what it forwards
instead (`hold`): verified, checked for everything that needs no pending state, kept in the mempool, and
NOT executed here; the member that orders validates it against its own pending state and its verdict is
the answer. The pending state then holds nothing, so a block from elsewhere moves it on for the price of a
new snapshot instead of validating again every message still pending. When the member takes the lead,
what it held is validated into open blocks before its first admission or seal (`rebuild`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from chain.v1 import block_pb2
from chain.v1 import message_pb2 as pb
from node.chain import Chain
from node.errors import MessageRejected, Reason
from node.server.telemetry.spans import NodeTelemetry
from node.server.write.dropped import DroppedMessages
from node.server.write.mempool import Mempool
from node.server.write.pending import PendingBlocks
from node.server.write.verify import Verifier
from node.state.transition import BlockOutput, Dropped
from node.storage.kv import ReadView
from node.storage.lmdb_store import ReadSnapshot


@dataclass(frozen=True)
class Outcome:
    index: int
    hash: bytes
    accepted: bool
    reason: str = ""
    detail: str = ""
    # the rejection's values (`MessageRejected.values`: e.g. the custody `cause`), for the `reason-values` trailer
    values: Mapping[str, Any] = field(default_factory=dict, hash=False)


class Pipeline:
    def __init__(
        self,
        chain: Chain,
        mempool: Mempool,
        verifier: Verifier,
        clock: Callable[[], float] = time.time,
        telemetry: NodeTelemetry | None = None,
        dropped: DroppedMessages | None = None,
    ) -> None:
        self.chain = chain
        self.telemetry = telemetry or NodeTelemetry()  # spans and block metrics (docs/observability.md)
        self.mempool = mempool
        self.verifier = verifier
        self.clock = clock
        self._snapshot: ReadSnapshot | None = None
        self._pending: PendingBlocks | None = None
        # hashes whose effects the pending state holds, in the order applied (= mempool order)
        self._validated: list[bytes] = []
        # what was admitted and then dropped, and why (GetMessage's MESSAGE_DROPPED; dropped.py)
        self.dropped = dropped if dropped is not None else DroppedMessages()
        self.rebuild()

    # ---- pending state ----
    def after_block(
        self,
        committed: Sequence[bytes],
        dropped: Sequence[Dropped],
        block_number: int,
        block: block_pb2.Block | None = None,
    ) -> list[bytes]:
        """Move the pending state onto the block just committed.

        `committed` are the hashes the block applied (already removed from the
        mempool). When `block` is the oldest open block as sealed here, the
        blocks above it move onto the new committed state as they are. When
        the block (ordered elsewhere) applied the oldest pending messages in
        order and dropped nothing, the pending effects are kept as one flat
        overlay; otherwise everything still pending is validated again."""
        assert self._pending is not None
        prefix = self._validated[: len(committed)]
        if block is not None and self._pending.is_next(block):
            self._pending = self._pending.drop_committed(self._move_snapshot())
        elif not self._validated:  # the pending state holds nothing (a member forwarding what it holds)
            self._snapshot_pending()
            self._remember_dropped(dropped, block_number)
            return []
        elif not dropped and prefix == list(committed) and self._pending.can_flatten:
            self._pending = self._pending.flattened(self._move_snapshot())
        else:
            return self.rebuild(dropped, block_number)
        self._validated = self._validated[len(committed) :]
        return []

    def _move_snapshot(self) -> ReadView:
        old = self._snapshot
        self._snapshot = self.chain.store.begin_read()
        if old is not None:
            old.close()
        return self._snapshot.view

    def rebuild(self, dropped: Sequence[Dropped] = (), block_number: int | None = None) -> list[bytes]:
        """Re-validate what is still pending, into open blocks on top of the new committed state.

        Returns the hashes that no longer apply (removed from the mempool, their reasons kept in `dropped`
        at `block_number`: the block just committed, by default the committed height)."""
        if block_number is None:
            block_number = self.chain.height
        self._remember_dropped(dropped, block_number)
        if self._snapshot is not None:
            self._snapshot.close()
        self._snapshot = self.chain.store.begin_read()
        self._pending = PendingBlocks(self.chain.params, self._snapshot.view)
        self._validated = []
        stale: list[bytes] = []
        wall_ms = int(self.clock() * 1000)
        for msg in self.mempool.messages():
            try:
                self._pending.admit(msg, wall_ms)
            except MessageRejected as exc:
                stale.append(bytes(msg.hash))
                self._remember(bytes(msg.hash), block_number, exc)
                continue
            self._validated.append(bytes(msg.hash))
        self.mempool.remove(stale)
        return stale

    def sealer(self, now_ms: int) -> Callable[[], BlockOutput] | None:
        """The oldest open block, closed to admissions, and the function that seals it into the next block
        (run it in a worker thread). A flat pending state (a member that was not ordering) is rebuilt into
        open blocks first. None when the pending state cannot give the next block as it is (its snapshot is
        not the committed head, or the oldest block is too old at `now_ms`): the orderer then builds the
        block from the mempool's messages."""
        assert self._pending is not None
        if self._pending.height != self.chain.height:
            return None
        if self._pending.flat or self._holds_unvalidated():  # e.g. a member that just took the lead
            self.rebuild(block_number=self._pending.height + 1)
        assert self._pending is not None and self._snapshot is not None
        seal = self._pending.sealer(self.chain.tree_nodes(self._snapshot.nodes), now_ms)
        if seal is None:
            return None

        def guarded() -> BlockOutput:
            with self.chain.guarded():  # a damaged tree node latches the store's fault, as in Chain.build
                return seal()

        return guarded

    async def next_block(self, now_ms: int) -> tuple[BlockOutput, bool]:
        """The next block, built in a worker thread, and whether it was sealed from the pending state (True:
        its messages executed once, at admission) or built by executing the oldest pending ones again (False:
        when `sealer` cannot give it)."""
        seal = self.sealer(now_ms)
        if seal is not None:
            return await asyncio.to_thread(seal), True
        return await asyncio.to_thread(self.chain.build, now_ms, self.mempool.take()), False

    def _holds_unvalidated(self) -> bool:
        """Does the mempool hold messages the pending state does not (held while forwarding, `hold`)? On the
        member that orders, every admission and every block keeps the two equal."""
        return len(self._validated) != len(self.mempool)

    def _remember_dropped(self, dropped: Sequence[Dropped], block_number: int) -> None:
        for d in dropped:
            self._remember(d.hash, block_number, d.error)

    def _remember(self, message_hash: bytes, block_number: int, error: MessageRejected) -> None:
        self.dropped.record(message_hash, error.reason.value, error.detail, block_number)

    # ---- submissions ----
    async def submit(self, msgs: Sequence[pb.Message], *, vouched: bool = False) -> list[Outcome]:
        """Admit `msgs` into the pending state and the mempool (the member that orders blocks).

        `vouched`: a cluster member verified these and proved it sent them (membership.py); not verified again."""
        if self._holds_unvalidated():  # this member held messages while it forwarded them: they are pending first
            self.rebuild()
        return await self._admit(msgs, vouched, pending=True)

    async def hold(self, msgs: Sequence[pb.Message], *, vouched: bool = False) -> list[Outcome]:
        """Keep `msgs` in the mempool without executing them (a member that forwards them, forwarding.py):
        verified, and checked for what needs no pending state (pending.py `precheck`). A pending state
        left from when this member ordered blocks is dropped first: the upstream's verdicts are the answer."""
        if self._validated:
            self._snapshot_pending()
        return await self._admit(msgs, vouched, pending=False)

    async def _admit(self, msgs: Sequence[pb.Message], vouched: bool, *, pending: bool) -> list[Outcome]:
        """Verify `msgs`, then admit each into the pending state (`pending`) or only check it without state
        (pending.py `precheck`), add the accepted ones to the mempool."""
        t = self.telemetry
        with t.stage("chain.submit", **{"chain.messages": len(msgs)}) as span:
            admission = t.admission()
            with t.stage("chain.verify"):
                verdicts = self.verifier.vouched(msgs) if vouched else await self.verifier.verify(msgs)
            # the pending state as it is now, after the await: a block committed meanwhile moved it on
            assert self._pending is not None
            check = self._pending.admit if pending else self._pending.precheck
            wall_ms = int(self.clock() * 1000)
            out: list[Outcome] = []
            admitted: dict[bytes, pb.Message] = {}  # in order; added to the mempool after validation
            mempool = self.mempool
            try:
                with t.stage("chain.validate"):
                    for i, (msg, verdict) in enumerate(zip(msgs, verdicts, strict=True)):
                        message_hash = verdict.hash
                        if verdict.reason:
                            out.append(Outcome(i, message_hash, False, verdict.reason, verdict.detail))
                            continue
                        try:
                            if message_hash in admitted or message_hash in mempool:
                                raise MessageRejected(Reason.DUPLICATE_MESSAGE, "message is already pending")
                            mempool.check_room(len(admitted))
                            check(msg, wall_ms)
                        except MessageRejected as exc:
                            out.append(Outcome(i, message_hash, False, exc.reason.value, exc.detail, exc.values))
                            continue
                        admitted[message_hash] = msg
                        out.append(Outcome(i, message_hash, True))
            finally:  # even after an unexpected error: the mempool holds what was admitted (and, with `pending`,
                # the pending state holds its effects)
                with t.stage("chain.mempool", **{"chain.messages": len(admitted)}):
                    # no await since validation: nothing came between, so these are not pending and fit
                    mempool.add_validated(admitted, admission)
                    self.dropped.discard(admitted)  # dropped before, admitted again: pending now
                    if pending:
                        self._validated.extend(admitted)
            t.submitted(msgs, out)
            if span is not None:
                span.set_attribute("chain.accepted", len(admitted))
                span.set_attribute("chain.rejected", len(msgs) - len(admitted))
                if len(msgs) == 1:
                    span.set_attribute("chain.message.hash", out[0].hash.hex())
                    if out[0].reason:
                        span.set_attribute("chain.reason_code", out[0].reason)
        return out

    def validated(self, hashes: Sequence[bytes]) -> bool:
        """Does the pending state hold any of `hashes` (this member orders blocks and may seal them)?"""
        return bool(self._validated) and not set(hashes).isdisjoint(self._validated)

    def forget(self, hashes: Sequence[bytes]) -> None:
        """`hashes` left the mempool (the upstream refused them): the pending state is rebuilt if it held any."""
        if self._validated and not set(hashes).isdisjoint(self._validated):
            self.rebuild()

    def values_of(self, msg: pb.Message, reason: str) -> Mapping[str, Any]:
        """The values of `reason` for `msg` as this member's state gives them (the `reason-values` trailer of
        an upstream's refusal, whose SubmitResult carries none): those of a dry run here when it is refused
        for the same reason, else none."""
        assert self._pending is not None
        try:
            self._pending.dry_run(msg, int(self.clock() * 1000))
        except MessageRejected as exc:
            return exc.values if exc.reason.value == reason else {}
        return {}

    def _snapshot_pending(self) -> None:
        """An empty pending state on a fresh snapshot of the committed state."""
        self._pending = PendingBlocks(self.chain.params, self._move_snapshot())
        self._validated = []

    async def dry_run(self, msg: pb.Message) -> Outcome:
        """Would this message be accepted now? Changes nothing."""
        verdict = (await self.verifier.verify([msg]))[0]
        if verdict.reason:
            return Outcome(0, verdict.hash, False, verdict.reason, verdict.detail)
        assert self._pending is not None
        try:
            if verdict.hash in self.mempool:
                raise MessageRejected(Reason.DUPLICATE_MESSAGE, "message is already pending")
            self._pending.dry_run(msg, int(self.clock() * 1000))
        except MessageRejected as exc:
            return Outcome(0, verdict.hash, False, exc.reason.value, exc.detail, exc.values)
        return Outcome(0, verdict.hash, True)

    def close(self) -> None:
        if self._snapshot is not None:
            self._snapshot.close()
            self._snapshot = None
