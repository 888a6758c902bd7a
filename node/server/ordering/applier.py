"""Applying blocks ordered elsewhere (the etcd log, an upstream node) and publishing them.

`apply` re-executes a block with the state transition, which checks its
header (number, parent, counts, state root) and raises `InvalidBlock` on any
difference, commits it in one LMDB transaction, then moves the mempool and
the pending state on and publishes the events, exactly as a locally built
block (`publish`).

`apply_run` does the same for several consecutive blocks (a member catching
up on the log) but moves the pending state on once, after the last one. A
follower's pending state holds nothing (pipeline.py `hold`), but a member
that was the leader until a moment ago still has one, and moving that after
a block ordered elsewhere validates again every message still pending on it;
doing it per block made a lagging member slower the further it lagged. Each
block is still committed and published on its own, in order.

How a block is applied is the member's `--verify-blocks`: `full` re-executes it as above; `root` applies
the write set the leader's execution made (`Chain.apply_writes`: the tree updated from the changed keys
here, the state root checked against the header, InvalidBlock on any difference) whenever the block comes
with one, and re-executes a block that comes without (an entry of an older leader, a followed node's block).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Literal

from chain.v1 import block_pb2
from node.chain import Chain
from node.server.events import EventHub
from node.server.storage_health import StorageHealth
from node.server.telemetry.spans import BlockRecorder
from node.server.write.mempool import Mempool
from node.server.write.pipeline import Pipeline
from node.state.transition import BlockOutput, Dropped

VerifyBlocks = Literal["full", "root"]
VERIFY_BLOCKS: tuple[VerifyBlocks, ...] = ("full", "root")


class BlockApplier:
    def __init__(
        self,
        chain: Chain,
        mempool: Mempool,
        pipeline: Pipeline,
        hub: EventHub,
        storage: StorageHealth | None = None,
        *,
        verify_blocks: VerifyBlocks = "full",
    ) -> None:
        self.chain = chain
        self.verify_blocks = verify_blocks
        self.storage = storage or StorageHealth()
        self.mempool = mempool
        self.pipeline = pipeline
        self.hub = hub

    async def apply(self, block: block_pb2.Block, write_set: bytes | None = None) -> BlockOutput:
        out, record = await self._from_log(block, write_set)
        self.publish(out, record)
        return out

    async def apply_run(
        self,
        blocks: Sequence[block_pb2.Block],
        on_applied: Callable[[int], None],
        write_sets: Sequence[bytes | None] = (),
    ) -> None:
        """Apply consecutive `blocks` in order (each with its write set in `write_sets`, when given), calling
        `on_applied(number)` after each commit; the pending state is moved on once at the end (also when one
        fails: the ones before it are committed)."""
        committed: list[bytes] = []
        dropped: list[Dropped] = []
        last: BlockOutput | None = None
        try:
            for i, block in enumerate(blocks):
                out, record = await self._from_log(block, write_sets[i] if i < len(write_sets) else None)
                committed += self._settle(out, record)
                dropped += out.dropped
                self.hub.publish(out.block, out.applied)
                last = out
                on_applied(int(block.header.number))
        finally:
            if last is not None:
                self.pipeline.after_block(committed, dropped, last.block.header.number, last.block)

    async def _from_log(self, block: block_pb2.Block, write_set: bytes | None) -> tuple[BlockOutput, BlockRecorder]:
        """A block of the log applied (by its write set, or executed again) and committed here (not yet
        published)."""
        # Signatures were checked by the member that admitted each message; the root check covers execution.
        by_write_set = write_set is not None and self.verify_blocks == "root"
        record = self.pipeline.telemetry.block("writeset" if by_write_set else "log")
        with self.storage.counting():  # the writer process that runs the tree update may be lost twice
            if by_write_set:
                assert write_set is not None
                out = await asyncio.to_thread(self.chain.apply_writes, block, write_set)
            else:
                out = await asyncio.to_thread(self.chain.apply, block, verify=False)
        record.built()
        await self._commit_only(out)
        return out, record

    async def _commit_only(self, out: BlockOutput) -> None:
        with self.storage.counting():  # the caller's loop retries the block; admissions are refused meanwhile
            await asyncio.to_thread(self.chain.commit, out)
        self.storage.succeeded()

    async def commit(self, out: BlockOutput, record: BlockRecorder | None = None) -> None:
        record = record or self.pipeline.telemetry.block("local")
        await self._commit_only(out)
        self.publish(out, record)

    def publish(self, out: BlockOutput, record: BlockRecorder | None = None) -> None:
        committed = self._settle(out, record or self.pipeline.telemetry.block("local"))
        self.pipeline.after_block(committed, out.dropped, out.block.header.number, out.block)
        self.hub.publish(out.block, out.applied)

    def _settle(self, out: BlockOutput, record: BlockRecorder) -> list[bytes]:
        """A committed block recorded and its messages (committed and dropped) out of the mempool; the
        hashes of the committed ones."""
        record.committed(out, self.mempool.admissions)
        committed = [bytes(r.message.hash) for r in out.applied]
        self.mempool.remove(committed + [d.hash for d in out.dropped])
        return committed
