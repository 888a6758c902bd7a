"""Envelope verification (canonical encoding, hash, Ed25519), inline or in worker processes.

Signature checks are the most expensive step of a submission and need no
state, so large batches are spread over a process pool: with two cores one
worker verifies while the main process validates and builds blocks.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

from chain.v1 import message_pb2 as pb
from node.codec import check_envelope, parse_message
from node.crypto.ed25519 import Ed25519Verifier
from node.errors import MessageRejected

INLINE_BELOW = 16


@dataclass(frozen=True)
class Verdict:
    hash: bytes
    reason: str = ""
    detail: str = ""


def verify_one(msg: pb.Message, verifier: Ed25519Verifier, max_bytes: int) -> Verdict:
    try:
        return Verdict(check_envelope(msg, verifier, max_bytes))
    except MessageRejected as exc:
        return Verdict(bytes(msg.hash), exc.reason.value, exc.detail)


def verify_raw_batch(raws: Sequence[bytes], max_bytes: int) -> list[Verdict]:
    """Runs in a worker process: parse and verify serialized messages."""
    verifier = Ed25519Verifier(cache_size=64)
    out = []
    for raw in raws:
        try:
            msg = parse_message(raw, max_bytes + 1024)
        except MessageRejected as exc:
            out.append(Verdict(b"", exc.reason.value, exc.detail))
            continue
        out.append(verify_one(msg, verifier, max_bytes))
    return out


class Verifier:
    """Verifies envelopes inline for small batches and in a process pool for large ones."""

    def __init__(self, workers: int, max_bytes: int) -> None:
        if workers < 0:
            workers = max(0, (os.cpu_count() or 1) - 1)
        self.max_bytes = max_bytes
        self._inline = Ed25519Verifier()
        self._pool = ProcessPoolExecutor(max_workers=workers) if workers > 0 else None
        self._workers = workers

    async def verify(self, msgs: Sequence[pb.Message]) -> list[Verdict]:
        if self._pool is None or len(msgs) < INLINE_BELOW:
            return [verify_one(m, self._inline, self.max_bytes) for m in msgs]
        raws = [m.SerializeToString() for m in msgs]
        loop = asyncio.get_running_loop()
        parts = max(1, self._workers)
        size = -(-len(raws) // parts)
        futures = [
            loop.run_in_executor(self._pool, verify_raw_batch, raws[i : i + size], self.max_bytes)
            for i in range(0, len(raws), size)
        ]
        return [v for part in await asyncio.gather(*futures) for v in part]

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
