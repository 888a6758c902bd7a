"""Ordering: the `Orderer` interface and the single-node `solo` orderer.

Solo cuts a block every `block_interval` while the mempool is not empty (and
an empty block at most every `empty_block_interval`): it seals the oldest
open block of the pending state, whose messages were executed when they
were admitted (node/server/write/pending.py), or, when the pending state
cannot give the next block as it is, builds it from the mempool with the
state transition; commits it in one LMDB transaction, moves the pending
state on, and publishes the events. Building runs in a worker thread so
the event loop keeps serving reads and submissions meanwhile. A commit the
disk refuses (node/server/storage_health.py) is retried with backoff while
submissions are refused with STORAGE_FAILED; the candidates stay pending.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from typing import Protocol

from chain.v1 import message_pb2 as pb
from node.chain import Chain
from node.errors import StorageFailed
from node.server.events import EventHub
from node.server.ordering.applier import BlockApplier
from node.server.ordering.cadence import BlockCadence
from node.server.ordering.state import SERVING, MemberStatus, current
from node.server.storage_health import StorageHealth
from node.server.write.mempool import Mempool
from node.server.write.pipeline import Outcome, Pipeline
from node.state.transition import BlockOutput

log = logging.getLogger("chain.orderer")


class Orderer(Protocol):
    """What the node needs from an orderer: `solo` here, `etcd` (replicated.py), `--follow` (follower.py)."""

    @property
    def role(self) -> str: ...

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    @property
    def pending_blocks(self) -> int: ...

    @property
    def leader(self) -> str:
        """The address writes are ordered at ("" when this node orders them alone, or none is known)."""
        ...

    @property
    def log_height(self) -> int:
        """The newest block ordered anywhere that this node knows of."""
        ...

    @property
    def serving(self) -> bool:
        """False while this node is too far behind or stopped (health turns NOT_SERVING)."""
        ...

    @property
    def member_status(self) -> MemberStatus:
        """The state this node is in, and why (state.py): what `serving` and `submit` read."""
        ...

    async def submit(self, msgs: Sequence[pb.Message], *, vouched: bool = False) -> list[Outcome]:
        """Admit submitted messages (a follower also forwards them to the leader). `vouched`: a cluster
        member verified them and proved it sent them (node/server/write/membership.py)."""
        ...

    async def read_index(self) -> int:
        """The height every block committed anywhere is at or below, learnt now (a linearizable read reads
        at or past it: node/server/rpc/consistency.py). Raises when it cannot be learnt."""
        ...


class SoloOrderer:
    role = "solo"

    def __init__(
        self,
        chain: Chain,
        mempool: Mempool,
        pipeline: Pipeline,
        hub: EventHub,
        *,
        block_interval: float,
        empty_block_interval: float,
        clock: Callable[[], float] = time.time,
        on_block: Callable[[BlockOutput], None] | None = None,
        storage: StorageHealth | None = None,
    ) -> None:
        self.chain = chain
        self.mempool = mempool
        self.pipeline = pipeline
        self.hub = hub
        self.block_interval = block_interval
        self.empty_block_interval = empty_block_interval
        self.clock = clock
        self.on_block = on_block
        self.storage = storage or StorageHealth()
        self._publisher = BlockApplier(chain, mempool, pipeline, hub, self.storage)
        self._task: asyncio.Task[None] | None = None
        self._building = 0
        self.cadence = BlockCadence(block_interval, empty_block_interval, clock)
        self._stopping = asyncio.Event()

    @property
    def pending_blocks(self) -> int:
        return self._building

    leader = ""

    @property
    def member_status(self) -> MemberStatus:
        return current(SERVING, self.storage, "")

    @property
    def serving(self) -> bool:
        return self.member_status.state.serving

    @property
    def log_height(self) -> int:
        return self.chain.height

    @property
    def blocks_from_pending(self) -> int:
        return self.cadence.blocks_from_pending

    @property
    def blocks_executed_again(self) -> int:
        return self.cadence.blocks_executed_again

    async def read_index(self) -> int:
        """Solo orders every block itself: what it has committed is all there is."""
        return self.chain.height

    async def submit(self, msgs: Sequence[pb.Message], *, vouched: bool = False) -> list[Outcome]:
        self.storage.check()  # STORAGE_FAILED: never "accepted" for a block that cannot be written
        return await self.pipeline.submit(msgs, vouched=vouched)

    async def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="solo-orderer")

    async def stop(self) -> None:
        self._stopping.set()  # wakes the loop now, not at the end of its interval
        if self._task is not None:
            await self._task
            self._task = None

    async def _run(self) -> None:
        while not self._stopping.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), self.cadence.wait())
            if self._stopping.is_set():
                break
            try:
                await self.cadence.tick(len(self.mempool), self.produce)
            except StorageFailed as exc:
                self.cadence.retry_in(self.storage.failed(exc))  # retried with backoff, candidates kept
            except Exception:  # a long-running loop never dies on one bad block
                log.exception("block production failed; retrying next interval")

    async def produce(self) -> BlockOutput:
        self._building = 1
        record = self.pipeline.telemetry.block("local")
        started = time.perf_counter()
        try:
            now_ms = int(self.clock() * 1000)
            out, sealed = await self.pipeline.next_block(now_ms)  # sealed: the oldest open block, executed once
            self.cadence.built(sealed)
            built = time.perf_counter()
            record.built()
            await asyncio.to_thread(self.chain.commit, out)
        finally:
            self._building = 0
        self.storage.succeeded()
        log.debug(
            "block %d: %d messages (%d dropped), build %.0f ms, commit %.0f ms, mempool %d",
            out.block.header.number,
            len(out.applied),
            len(out.dropped),
            (built - started) * 1000,
            (time.perf_counter() - built) * 1000,
            len(self.mempool),
        )
        self.cadence.committed()
        self._publisher.publish(out, record)  # span and metrics, mempool, pending state, events: as for any block
        if self.on_block is not None:
            self.on_block(out)
        return out
