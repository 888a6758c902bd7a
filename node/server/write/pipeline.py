"""The write path: verify -> validate against committed state plus pending effects -> mempool.

Validation runs every candidate through the real state transition on an
overlay (`pending`) that sits on a read snapshot of the committed state and
already holds the effects of every message in the mempool, so a message that
depends on a pending one (a ref update after its commit bundle) is accepted,
and two conflicting ones are not both admitted. After each block the overlay
is rebuilt on the new committed state from the messages still pending.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from chain.v1 import message_pb2 as pb
from node.chain import Chain
from node.errors import MessageRejected, Reason
from node.server.telemetry.spans import NodeTelemetry
from node.server.write.mempool import Mempool
from node.server.write.verify import Verifier
from node.state.transition import Dropped, apply_message
from node.storage.kv import Overlay
from node.storage.lmdb_store import ReadSnapshot

DROPPED_MEMORY = 100_000


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
    ) -> None:
        self.chain = chain
        self.telemetry = telemetry or NodeTelemetry()  # spans and block metrics (docs/observability.md)
        self.mempool = mempool
        self.verifier = verifier
        self.clock = clock
        self._snapshot: ReadSnapshot | None = None
        self._pending: Overlay | None = None
        self._next_block = 0
        # hashes whose effects the pending overlay holds, in the order applied (= mempool order)
        self._validated: list[bytes] = []
        self.dropped: OrderedDict[bytes, tuple[int, str, str]] = OrderedDict()
        self.rebuild()

    # ---- pending state ----
    def after_block(self, committed: Sequence[bytes], dropped: Sequence[Dropped], block_number: int) -> list[bytes]:
        """Move the pending state onto the block just committed.

        `committed` are the hashes the block applied (already removed from the
        mempool). When they were the oldest pending messages in order and nothing
        was dropped, the pending overlay already equals the new committed state
        plus the effects of what is still pending, so it is rebased as it is;
        otherwise everything still pending is validated again."""
        prefix = self._validated[: len(committed)]
        if not dropped and prefix == list(committed) and self._pending is not None:
            old = self._snapshot
            self._snapshot = self.chain.store.begin_read()
            self._pending = self._pending.rebase(self._snapshot.view)
            self._validated = self._validated[len(committed) :]
            self._next_block = self.chain.height + 1
            if old is not None:
                old.close()
            return []
        return self.rebuild(dropped, block_number)

    def rebuild(self, dropped: Sequence[Dropped] = (), block_number: int = 0) -> list[bytes]:
        """Re-validate what is still pending on top of the new committed state.

        Returns the hashes that no longer apply (removed from the mempool, reasons kept)."""
        for d in dropped:
            self._remember(d.hash, block_number, d.error)
        if self._snapshot is not None:
            self._snapshot.close()
        self._snapshot = self.chain.store.begin_read()
        self._pending = Overlay(self._snapshot.view)
        self._validated = []
        self._next_block = self.chain.height + 1
        stale: list[bytes] = []
        now = int(self.clock())
        for msg in self.mempool.messages():
            try:
                self._apply(self._pending, msg, now)
            except MessageRejected as exc:
                stale.append(bytes(msg.hash))
                self._remember(bytes(msg.hash), block_number, exc)
                continue
            self._validated.append(bytes(msg.hash))
        self.mempool.remove(stale)
        return stale

    def _remember(self, message_hash: bytes, block_number: int, error: MessageRejected) -> None:
        self.dropped[message_hash] = (block_number, error.reason.value, error.detail)
        while len(self.dropped) > DROPPED_MEMORY:
            self.dropped.popitem(last=False)

    def _apply(self, parent: Overlay, msg: pb.Message, now: int) -> None:
        apply_message(parent, self.chain.params, msg, block_number=self._next_block, now=now, event_id=0, verifier=None)

    # ---- submissions ----
    async def submit(self, msgs: Sequence[pb.Message], *, vouched: bool = False) -> list[Outcome]:
        """`vouched`: a cluster member verified these and proved it sent them (membership.py); not verified again."""
        t = self.telemetry
        with t.stage("chain.submit", **{"chain.messages": len(msgs)}) as span:
            admission = t.admission()
            with t.stage("chain.verify"):
                verdicts = self.verifier.vouched(msgs) if vouched else await self.verifier.verify(msgs)
            assert self._pending is not None
            now = int(self.clock())
            out: list[Outcome] = []
            admitted: dict[bytes, pb.Message] = {}  # in order; added to the mempool after validation
            try:
                with t.stage("chain.validate"):
                    for i, (msg, verdict) in enumerate(zip(msgs, verdicts, strict=True)):
                        if verdict.reason:
                            out.append(Outcome(i, verdict.hash, False, verdict.reason, verdict.detail))
                            continue
                        try:
                            if verdict.hash in self.mempool or verdict.hash in admitted:
                                raise MessageRejected(Reason.DUPLICATE_MESSAGE, "message is already pending")
                            self.mempool.check_room(len(admitted))
                            self._apply(self._pending, msg, now)
                        except MessageRejected as exc:
                            out.append(Outcome(i, verdict.hash, False, exc.reason.value, exc.detail, exc.values))
                            continue
                        admitted[verdict.hash] = msg
                        out.append(Outcome(i, verdict.hash, True))
            finally:  # even after an unexpected error: what the pending state holds is what the mempool holds
                with t.stage("chain.mempool", **{"chain.messages": len(admitted)}):
                    for message_hash, msg in admitted.items():  # no await since validation: nothing came between
                        self.mempool.add(msg, admission)
                        self._validated.append(message_hash)
            t.submitted(msgs, out)
            if span is not None:
                span.set_attribute("chain.accepted", len(admitted))
                span.set_attribute("chain.rejected", len(msgs) - len(admitted))
                if len(msgs) == 1:
                    span.set_attribute("chain.message.hash", out[0].hash.hex())
                    if out[0].reason:
                        span.set_attribute("chain.reason_code", out[0].reason)
        return out

    async def dry_run(self, msg: pb.Message) -> Outcome:
        """Would this message be accepted now? Changes nothing."""
        verdict = (await self.verifier.verify([msg]))[0]
        if verdict.reason:
            return Outcome(0, verdict.hash, False, verdict.reason, verdict.detail)
        assert self._pending is not None
        try:
            if verdict.hash in self.mempool:
                raise MessageRejected(Reason.DUPLICATE_MESSAGE, "message is already pending")
            self._apply(self._pending.child(), msg, int(self.clock()))
        except MessageRejected as exc:
            return Outcome(0, verdict.hash, False, exc.reason.value, exc.detail, exc.values)
        return Outcome(0, verdict.hash, True)

    def close(self) -> None:
        if self._snapshot is not None:
            self._snapshot.close()
            self._snapshot = None
