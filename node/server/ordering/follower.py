"""Read-replica mode (`--follow ADDR`): follow another node's blocks without joining the ordering.

The replica streams blocks from the upstream node with SubscribeBlocks
(from its height + 1, chunks included), re-executes each one with the state
transition (which checks the state root) and commits it. A gap in the stream
(a block number it has not reached yet) or a broken stream falls back to
GetBlock polling until the replica has caught up, then it subscribes again.
Writes are verified and validated locally and forwarded upstream
(forwarding.py). The upstream height is read with GetNodeStatus for the lag.
A block that does not match the replica's state halts it (HALTED in state.py:
writes STATE_DIVERGED, NOT_SERVING, reads go on); a failed round's wait is
decided by state.wait_after, as in the replicated orderer.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

import grpc

from chain.v1 import message_pb2 as pb
from chain.v1 import rpc_pb2, service_pb2_grpc
from node.chain import Chain
from node.errors import CHAIN_READ_CONSISTENCY, LINEARIZABLE, InvariantBroken
from node.observability.logs import Every
from node.server.ordering.applier import BlockApplier
from node.server.ordering.state import SERVING, MemberStatus, Pacing, Say, Wait, after, current, wait_after
from node.server.write.forwarding import Forwarder, stopping
from node.server.write.pipeline import Outcome
from node.tls import ClientTLS, aio_channel

if TYPE_CHECKING:
    from chain.v1.service_pb2_grpc import ChainServiceAsyncStub

log = logging.getLogger("chain.follower")
UNREACHABLE_LOG_EVERY = 5.0  # seconds between "upstream ...; polling" lines while the upstream stays unreachable


class FollowOrderer:
    role = "replica"

    def __init__(
        self,
        chain: Chain,
        applier: BlockApplier,
        forwarder: Forwarder,
        upstream: str,
        *,
        max_lag_blocks: int,
        poll_interval: float = 0.2,
        status_interval: float = 1.0,
        tls: ClientTLS | None = None,
    ) -> None:
        """`upstream`: the followed node's internal listener; `tls`: mutual TLS to it (None: plaintext)."""
        self.chain = chain
        self.tls = tls
        self.applier = applier
        self.forwarder = forwarder
        self.upstream = upstream
        self.max_lag_blocks = max_lag_blocks
        self.poll_interval = poll_interval
        self.status_interval = status_interval
        self._held = SERVING  # HALTED once a block's state root differs from ours (final)
        self._height = chain.height
        self._upstream_height = -1  # unknown until the first GetNodeStatus answers
        self._channel: grpc.aio.Channel | None = None
        self._stopping = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    # ---- the Orderer interface ----
    @property
    def leader(self) -> str:
        return self.upstream

    @property
    def log_height(self) -> int:
        return max(self._upstream_height, self._height)

    @property
    def pending_blocks(self) -> int:
        return self.log_height - self._height

    @property
    def member_status(self) -> MemberStatus:
        """This replica's state (state.py): HALTED, the store's, CATCHING_UP or SERVING."""
        return current(self._held, self.applier.storage, self._behind())

    def _behind(self) -> str:
        if self._upstream_height < 0:
            return "the upstream's height is not known yet"
        if self.pending_blocks > self.max_lag_blocks:
            return f"{self.pending_blocks} blocks behind the upstream (more than {self.max_lag_blocks})"
        return ""

    @property
    def serving(self) -> bool:
        return self.member_status.state.serving

    async def read_index(self) -> int:
        """A replica has no log of its own: the upstream's height after a linearizable read there (GetNodeStatus
        with `chain-read-consistency: linearizable`, which an etcd member answers once it has applied the log's
        height, and a solo node at once). grpc.aio.AioRpcError when the upstream does not answer."""
        if self._channel is None:
            raise InvariantBroken("the replica reads its upstream only once started")
        stub: ChainServiceAsyncStub = service_pb2_grpc.ChainServiceStub(self._channel)
        wish = ((CHAIN_READ_CONSISTENCY, LINEARIZABLE),)
        response = await stub.GetNodeStatus(rpc_pb2.GetNodeStatusRequest(), metadata=wish)
        return int(response.status.block_height)

    async def submit(self, msgs: Sequence[pb.Message], *, vouched: bool = False) -> list[Outcome]:
        if self._stopping.is_set():
            raise stopping()
        refused = self.member_status.refusal(admits=False, storage=self.applier.storage)  # it forwards all
        if refused is not None:
            raise refused
        return await self.forwarder.submit(msgs, self.upstream, vouched=vouched)

    async def start(self) -> None:
        options = [("grpc.max_receive_message_length", 64 * 1024 * 1024)]
        self._channel = aio_channel(self.upstream, self.tls, options, secure=self.tls is not None)
        stub: ChainServiceAsyncStub = service_pb2_grpc.ChainServiceStub(self._channel)
        self._tasks = [
            asyncio.create_task(self._follow(stub), name="follow-blocks"),
            asyncio.create_task(self._watch_upstream(stub), name="follow-status"),
        ]

    async def stop(self) -> None:
        self._stopping.set()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []
        await self.forwarder.close()
        if self._channel is not None:
            await self._channel.close(None)

    # ---- following ----
    async def _apply(self, number: int, got: rpc_pb2.GetBlockResponse | rpc_pb2.SubscribeBlocksResponse) -> None:
        if number != self._height + 1:
            return
        await self.applier.apply(got.block)
        self._height = number

    async def _poll(self, stub: ChainServiceAsyncStub, until: int) -> None:
        """GetBlock from our height + 1 up to `until` (inclusive) or the first block the upstream lacks."""
        while self._height < until and not self._stopping.is_set():
            try:
                resp = await stub.GetBlock(rpc_pb2.GetBlockRequest(block_number=self._height + 1), timeout=10)
            except grpc.aio.AioRpcError as err:
                if err.code() == grpc.StatusCode.NOT_FOUND:
                    return
                raise
            await self._apply(int(resp.block.header.number), resp)

    async def _follow(self, stub: ChainServiceAsyncStub) -> None:
        unreachable = Every(UNREACHABLE_LOG_EVERY)
        while not self._stopping.is_set():
            wait = self.poll_interval
            try:
                if not self._held.state.final:
                    await self._stream(stub)
            except Exception as exc:
                retry = self.applier.storage.retry_after_ms / 1000
                after_failure = wait_after(exc, Pacing(self.poll_interval, self.poll_interval, retry))
                self._failed(exc, after_failure, unreachable)
                wait = after_failure.seconds
            await asyncio.sleep(wait)

    async def _stream(self, stub: ChainServiceAsyncStub) -> None:
        """Poll up to the upstream's height, then take its blocks as they come, filling gaps by polling."""
        await self._poll(stub, max(self._upstream_height, self._height + 1))
        request = rpc_pb2.SubscribeBlocksRequest(from_block=self._height + 1, include_chunks=True)
        async for resp in stub.SubscribeBlocks(request):
            number = int(resp.block.header.number)
            if number > self._height + 1:  # a gap: fill it by polling, then go on streaming
                await self._poll(stub, number - 1)
            await self._apply(number, resp)

    def _failed(self, exc: Exception, wait: Wait, unreachable: Every) -> None:
        """Log a failed round and take the state it sets (called in the `except` block)."""
        if wait.status is not None:
            if not self._held.state.final:
                log.critical("this replica stops taking writes: %s", wait.status.reason)
            self._held = after(self._held, wait.status)
        if wait.say is Say.UNREACHABLE and unreachable.due():
            what = exc.code().name if isinstance(exc, grpc.aio.AioRpcError) else str(exc)
            log.warning("upstream %s: %s; polling", self.upstream, what)
        elif wait.say is Say.TRACEBACK:
            log.exception("following %s failed; retrying", self.upstream)

    async def _watch_upstream(self, stub: ChainServiceAsyncStub) -> None:
        while not self._stopping.is_set():
            try:
                resp = await stub.GetNodeStatus(rpc_pb2.GetNodeStatusRequest(), timeout=5)
                self._upstream_height = int(resp.status.block_height)
                await self.forwarder.reforward(self.upstream)
            except grpc.aio.AioRpcError as err:
                log.debug("upstream status: %s", err.code().name)
            except Exception:
                log.exception("upstream status failed")
            await asyncio.sleep(self.status_interval)
