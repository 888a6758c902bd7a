"""Applying blocks ordered elsewhere (the etcd log, an upstream node) and publishing them.

`apply` re-executes a block with the state transition, which checks its
header (number, parent, counts, state root) and raises `InvalidBlock` on any
difference, commits it in one LMDB transaction, then moves the mempool and
the pending state on and publishes the events, exactly as a locally built
block (`publish`).
"""

from __future__ import annotations

import asyncio

from chain.v1 import block_pb2
from node.chain import Chain
from node.errors import StorageFailed
from node.server.events import EventHub
from node.server.storage_health import StorageHealth
from node.server.telemetry.spans import BlockRecorder
from node.server.write.mempool import Mempool
from node.server.write.pipeline import Pipeline
from node.state.transition import BlockOutput


class BlockApplier:
    def __init__(
        self, chain: Chain, mempool: Mempool, pipeline: Pipeline, hub: EventHub, storage: StorageHealth | None = None
    ) -> None:
        self.chain = chain
        self.storage = storage or StorageHealth()
        self.mempool = mempool
        self.pipeline = pipeline
        self.hub = hub

    async def apply(self, block: block_pb2.Block) -> BlockOutput:
        # Signatures were checked by the member that admitted each message; the root check covers execution.
        record = self.pipeline.telemetry.block("log")
        out = await asyncio.to_thread(self.chain.apply, block, verify=False)
        record.built()
        await self.commit(out, record)
        return out

    async def commit(self, out: BlockOutput, record: BlockRecorder | None = None) -> None:
        record = record or self.pipeline.telemetry.block("local")
        try:
            await asyncio.to_thread(self.chain.commit, out)
        except StorageFailed as exc:
            self.storage.failed(exc)  # the caller's loop retries the block; admissions are refused meanwhile
            raise
        self.storage.succeeded()
        self.publish(out, record)

    def publish(self, out: BlockOutput, record: BlockRecorder | None = None) -> None:
        (record or self.pipeline.telemetry.block("local")).committed(out, self.mempool.admissions)
        committed = [bytes(r.message.hash) for r in out.applied]
        self.mempool.remove(committed + [d.hash for d in out.dropped])
        self.pipeline.after_block(committed, out.dropped, out.block.header.number, out.block)
        self.hub.publish(out.block, out.applied)
