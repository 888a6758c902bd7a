"""Envelope verification (canonical encoding, hash, Ed25519), inline or in worker processes.

Signature checks are the most expensive step of a submission and need no
state, so large batches are spread over worker processes: with two cores one
worker verifies while the main process validates and builds blocks.

The hand-off is one frame per worker per batch over the worker's own socket pair (verify_worker.py: the
serialized messages there, and back only the refusals: position, hash, reason, detail), so the main
process unpickles nothing per accepted message; it makes each accepted message's verdict from the hash
the message carries, which the worker found equal to the hash of its canonical data.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import NamedTuple

from chain.v1 import message_pb2 as pb
from node.codec import check_envelope, parse_message
from node.crypto.ed25519 import Ed25519Verifier
from node.errors import MessageRejected, Reason
from node.server.write.verify_worker import STALL_SECONDS, BrokenWorker, PipeWorker

INLINE_BELOW = 16
# every reason a verification (parse, canonical encoding, hash, Ed25519) can give
VERIFY_REASONS = frozenset(
    r.value
    for r in (
        Reason.MALFORMED_MESSAGE, Reason.MESSAGE_TOO_LARGE, Reason.DATA_BYTES_MISMATCH, Reason.HASH_MISMATCH,
        Reason.INVALID_SIGNATURE,
    )
)  # fmt: skip
log = logging.getLogger("chain.verify")


class Verdict(NamedTuple):  # a tuple: made once per submitted message, cheaply
    hash: bytes
    reason: str = ""
    detail: str = ""


class Refusal(NamedTuple):
    """A worker's answer for one message it refused: its position in the batch sent, and its verdict."""

    position: int
    verdict: Verdict


def verify_one(msg: pb.Message, verifier: Ed25519Verifier, max_bytes: int) -> Verdict:
    try:
        return Verdict(check_envelope(msg, verifier, max_bytes))
    except MessageRejected as exc:
        return Verdict(bytes(msg.hash), exc.reason.value, exc.detail)


def refusals_in(raws: Sequence[bytes], max_bytes: int) -> list[Refusal]:
    """Runs in a worker process: parse and verify serialized messages; only the refused ones are returned
    (a message not listed passed, and its hash is the one it carries)."""
    verifier = Ed25519Verifier(cache_size=64)
    out = []
    for i, raw in enumerate(raws):
        try:
            msg = parse_message(raw, max_bytes + 1024)
        except MessageRejected as exc:
            out.append(Refusal(i, Verdict(b"", exc.reason.value, exc.detail)))
            continue
        verdict = verify_one(msg, verifier, max_bytes)
        if verdict.reason:
            out.append(Refusal(i, verdict))
    return out


class Verifier:
    """Verifies envelopes inline for small batches and in a process pool for large ones."""

    def __init__(self, workers: int, max_bytes: int, *, stall_seconds: float = STALL_SECONDS) -> None:
        """`workers`: worker processes (0: every batch inline; `--verify-workers -1` is sized by
        sizing.verify_worker_count before it comes here)."""
        self.max_bytes = max_bytes
        self._inline = Ed25519Verifier()
        self._workers = workers
        self._stall_seconds = stall_seconds  # a worker silent this long while batches wait is killed
        self._pool = self._new_pool()
        self._warming: asyncio.Task[None] | None = None

    def _new_pool(self) -> list[PipeWorker] | None:
        if self._workers <= 0:
            return None
        return [
            PipeWorker(refusals_in, name=f"chain-verify-{i}", stall_seconds=self._stall_seconds)
            for i in range(self._workers)
        ]

    async def warm_up(self) -> None:
        """Start the worker processes now rather than on the first large batch."""
        if self._pool is not None:
            await self._pooled([])

    def start_warm_up(self) -> None:
        """`warm_up` in the background: the node reaches SERVING without waiting for a worker process to
        spawn and import (about as long as the node's own start on two cores). Until the workers are up a
        large batch waits for them as it would on a cold pool; small ones are verified inline anyway."""
        if self._pool is not None and self._warming is None:
            self._warming = asyncio.create_task(self.warm_up(), name="verify-warm-up")
            self._warming.add_done_callback(_log_failure)

    async def verify(self, msgs: Sequence[pb.Message]) -> list[Verdict]:
        if self._pool is None or len(msgs) < INLINE_BELOW:
            return self._verify_inline(msgs)
        try:
            return await self._pooled(msgs)
        except BrokenWorker as exc:
            log.error("a verify worker ended (%s); starting new ones and verifying this batch inline", exc)
            self._restart()
            return self._verify_inline(msgs)

    def _restart(self) -> None:
        """New (unstarted) workers in place of a pool that had a broken one; the old ones are closed."""
        if self._pool is not None and any(w.broken for w in self._pool):
            for worker in self._pool:
                worker.close()
            self._pool = self._new_pool()

    @property
    def worker_pids(self) -> list[int]:
        """The process ids of the workers started (none before the first start, or inline only)."""
        return [w.pid for w in self._pool or () if w.pid is not None]

    @staticmethod
    def vouched(msgs: Sequence[pb.Message]) -> list[Verdict]:
        """Verdicts for a batch a cluster member verified and proved it sent (membership.py): no check here."""
        return [Verdict(bytes(m.hash)) for m in msgs]

    def _verify_inline(self, msgs: Sequence[pb.Message]) -> list[Verdict]:
        return [verify_one(m, self._inline, self.max_bytes) for m in msgs]

    async def _pooled(self, msgs: Sequence[pb.Message]) -> list[Verdict]:
        assert self._pool is not None
        pool = self._pool  # this batch's workers, even if a failure elsewhere replaces them meanwhile
        await asyncio.gather(*(w.ready() for w in pool))
        if not msgs:
            await asyncio.gather(*(w.call([], self.max_bytes) for w in pool))
            return []
        raws = [m.SerializeToString() for m in msgs]
        size = -(-len(raws) // len(pool))
        starts = range(0, len(raws), size)
        calls = [pool[n].call(raws[i : i + size], self.max_bytes) for n, i in enumerate(starts)]
        verdicts = [Verdict(m.hash) for m in msgs]  # accepted unless a worker refused it (below)
        for start, refusals in zip(starts, await asyncio.gather(*calls), strict=True):
            for r in refusals:
                verdicts[start + r.position] = r.verdict
        return verdicts

    def close(self) -> None:
        if self._warming is not None:
            self._warming.cancel()
        for worker in self._pool or ():
            worker.close()


def _log_failure(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("verify workers did not start (large batches will restart the pool): %r", task.exception())
