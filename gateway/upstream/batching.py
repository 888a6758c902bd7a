"""Reads coalesced into one node call: the gateway's side of the internal ReadBatch RPC.

One grpc.aio unary call costs the gateway's event loop ~145 µs whatever it carries,
several times aiohttp's own work per GET. So the reads that reach a channel in the same event-loop turn
go to the node as ONE `chain.v1.ReadBatchService/ReadBatch` call (node/server/rpc/read_batch.py), each
item the method path and its serialised request; the node answers each item with that method's own
handler: the response bytes, or the status, details and trailers a direct call would have had, which this
module raises as the same `grpc.aio.AioRpcError` so gateway/errors.py maps it as it maps a direct call's.

- A lone read waits one loop turn at most: the first read of a turn schedules the send with `call_soon`;
  reads queued before it runs join it, up to `max_items` (a full batch is sent at once).
- At most `max_in_flight` batch calls are out at once per channel: the reads of a turn that ends while
  that many are out wait for the first of them to come back and go with every read queued meanwhile
  (a full batch still goes at once). Under load batches grow instead of calls multiplying: the node
  answers calls one after another on one event loop anyway, and both sides pay per call, not per read.
  When nothing is out, nothing waits.
- Each item carries its own deadline (what is left of the request timeout); the batch call's deadline is
  the latest of them.
- A failure of the whole call (UNAVAILABLE, DEADLINE_EXCEEDED, ...) is every item's failure, so
  `NodePool.read` retries UNAVAILABLE on the next node as it does for a direct call.
- Each batch goes as a message of one long-lived ReadStream per channel (gateway/upstream/readstream.py), which
  costs the node about a third of a unary call; what a stream that ended did not answer (whatever ended
  it) goes as a ReadBatch call, whose outcome is the batch's.
- A node without the RPC (an older node during a rollout) answers UNIMPLEMENTED: the batch's items are
  sent as direct calls, and so is every read for the next `REPROBE` seconds; then batching is tried again.
- `max_items` 0 (`--read-batch 0`) sends every read as a direct call; so does a channel made while
  tracing is on (`traced()`), so every GET's trace keeps its own span of the node call (one batch call
  carries one trace context).
- A read with metadata (the consistency a REST request asked for: `chain-min-height`,
  `chain-read-consistency`) goes as a direct call carrying it: a batch item carries none.
- Every answer comes with the height the node read it at (`chain-height`: the direct call's trailer, a
  batch item's own trailer), "" when the node named none (`Answer`).

No answer is kept: every read goes to the node (no cache).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from types import MappingProxyType
from typing import Any, Generic, TypeVar

import grpc
from google.protobuf.message import Message

from chain.v1 import read_batch_service_pb2 as pb
from gateway.upstream.readstream import REPROBE, ReadStream, Resend
from node.errors import CHAIN_HEIGHT, DEADLINE_DETAILS

M = TypeVar("M", bound=Message)

PATH = "/chain.v1.ReadBatchService/ReadBatch"
STOPPING = "gateway stopping"  # the details of a read cut short by the gateway's stop
MAX_IN_FLIGHT = 2  # batch calls out at once per channel; reads of later turns wait for one to come back
STATUS = MappingProxyType({code.value[0]: code for code in grpc.StatusCode})


@dataclass(frozen=True)
class Read(Generic[M]):
    """A read method: its full path and response type, e.g. Read("/chain.v1.ChainService/GetAccount", ...)."""

    path: str
    response: type[M]


Answer = tuple[bytes, str]
"""A read's response bytes and the height the node read it at (its `chain-height`; "" when not named)."""
Metadata = tuple[tuple[str, str], ...]


@dataclass
class _Item:
    method: str
    request: bytes
    deadline: float
    future: asyncio.Future[Answer]


def height_of(trailers: Any) -> str:
    """The `chain-height` of a call's trailing metadata (or a batch item's trailers), "" without one."""
    for pair in trailers or ():
        key, value = (pair.key, pair.value) if isinstance(pair, pb.ReadBatchTrailer) else pair
        if key == CHAIN_HEIGHT:
            return value if isinstance(value, str) else value.decode()
    return ""


def _error(
    code: grpc.StatusCode, details: str, trailers: Sequence[tuple[str, str]] = (), debug: str | None = None
) -> grpc.aio.AioRpcError:
    return grpc.aio.AioRpcError(code, grpc.aio.Metadata(), grpc.aio.Metadata(*trailers), details, debug)


def _fail(items: Sequence[_Item], error: Callable[[], BaseException]) -> None:
    """Each read still waiting gets its own copy of `error`."""
    for item in items:
        if not item.future.done():
            item.future.set_exception(error())


def _copy(err: grpc.aio.AioRpcError) -> grpc.aio.AioRpcError:
    metadata: Any = err.trailing_metadata() or ()  # grpc-stubs types the pairs as one opaque object
    trailers = tuple((str(k), str(v)) for k, v in metadata)
    return _error(err.code(), err.details() or "", trailers, err.debug_error_string())


def traced() -> bool:
    """Is the gRPC client instrumented for tracing (node/observability/tracing.py)? Never imports it."""
    module = sys.modules.get("opentelemetry.instrumentation.grpc")
    if module is None:  # tracing off: the instrumentation was never imported
        return False
    return bool(module.GrpcAioInstrumentorClient().is_instrumented_by_opentelemetry)


class ReadBatcher:
    """Coalesces the reads sent over one channel (one per upstream, gateway/upstream/pool.py)."""

    def __init__(
        self, channel: grpc.aio.Channel, max_items: int, max_in_flight: int = MAX_IN_FLIGHT, stream: bool = True
    ) -> None:
        self._channel = channel
        self.max_items = 0 if traced() else max_items
        self.max_in_flight = max(1, max_in_flight)
        self._batch: Any = channel.unary_unary(
            PATH,
            request_serializer=pb.ReadBatchRequest.SerializeToString,
            response_deserializer=pb.ReadBatchResponse.FromString,
        )
        self._stream = ReadStream(channel) if stream else None  # None: every batch is a ReadBatch call
        self._direct: dict[str, Any] = {}  # path -> a bytes-in, bytes-out multicallable
        self._pending: list[_Item] = []
        self._scheduled = False
        self._direct_until = 0.0  # loop time until which reads go direct (a node without ReadBatch)
        self._sending: set[asyncio.Task[None]] = set()
        self.batched_items = 0  # reads answered from a ReadBatch answer (the tests read these two)
        self.fallbacks = 0  # batches a node refused with UNIMPLEMENTED
        self.streamed = 0  # batches answered on the ReadStream

    async def read(self, rpc: Read[M], request: Message, timeout: float) -> M:
        raw = await self.call(rpc.path, request.SerializeToString(), timeout)
        return rpc.response.FromString(raw)

    async def call(self, method: str, request: bytes, timeout: float) -> bytes:
        return (await self.answer(method, request, timeout))[0]

    async def answer(self, method: str, request: bytes, timeout: float, metadata: Metadata = ()) -> Answer:
        """The read's answer and its height; with `metadata`, a direct call carrying it."""
        loop = asyncio.get_running_loop()
        now = loop.time()
        if metadata or self.max_items <= 0 or now < self._direct_until:
            return await self.direct_answer(method, request, timeout, metadata)
        item = _Item(method, request, now + timeout, loop.create_future())
        self._pending.append(item)
        if len(self._pending) >= self.max_items:
            self._send_pending()
        elif not self._scheduled:
            self._scheduled = True
            loop.call_soon(self._turn_ended)
        return await item.future

    async def direct(self, method: str, request: bytes, timeout: float) -> bytes:
        return (await self.direct_answer(method, request, timeout))[0]

    async def direct_answer(self, method: str, request: bytes, timeout: float, metadata: Metadata = ()) -> Answer:
        multicallable = self._direct.get(method)
        if multicallable is None:
            multicallable = self._direct[method] = self._channel.unary_unary(method, None, None)  # bytes as they are
        call = multicallable(request, timeout=timeout, metadata=metadata or None)
        raw: bytes = await call
        return raw, height_of(await call.trailing_metadata())

    def _turn_ended(self) -> None:
        self._scheduled = False
        if len(self._sending) < self.max_in_flight:
            self._send_pending()  # else the next call to come back sends them (_sent)

    def _send_pending(self) -> None:
        items, self._pending = self._pending, []
        if items:
            task = asyncio.get_running_loop().create_task(self._send(items))
            self._sending.add(task)
            task.add_done_callback(self._sent)

    def _sent(self, task: asyncio.Task[None]) -> None:
        self._sending.discard(task)
        if task.cancelled():  # the gateway is stopping: what waited for this call goes no further
            items, self._pending = self._pending, []
            _fail(items, partial(_error, grpc.StatusCode.CANCELLED, STOPPING))
        elif self._pending and not self._scheduled and len(self._sending) < self.max_in_flight:
            self._send_pending()

    async def _exchange(self, request: pb.ReadStreamRequest, deadline: float) -> pb.ReadBatchResponse:
        """The batch's answer: on the stream when it can, else from a ReadBatch call."""
        stream = self._stream
        if stream is not None and stream.usable(asyncio.get_running_loop().time()):
            try:
                response = await stream.exchange(request, deadline)
            except Resend:
                pass
            else:
                self.streamed += 1
                return response
        left = deadline - asyncio.get_running_loop().time()
        answer: pb.ReadBatchResponse = await self._batch(request.batch, timeout=max(0.001, left))
        return answer

    async def _send(self, items: list[_Item]) -> None:
        now = asyncio.get_running_loop().time()
        request = pb.ReadStreamRequest()
        add = request.batch.items.add  # each item made in place (a list of items would be copied in)
        for i in items:
            add(method=i.method, request=i.request, timeout_ms=max(1, int((i.deadline - now) * 1000)))
        try:
            response = await self._exchange(request, max(i.deadline for i in items))
        except TimeoutError:  # the stream's wait ran out: what the call's deadline would have said
            _fail(items, partial(_error, grpc.StatusCode.DEADLINE_EXCEEDED, DEADLINE_DETAILS))
            return
        except grpc.aio.AioRpcError as err:
            if err.code() == grpc.StatusCode.UNIMPLEMENTED:
                self._direct_until = now + REPROBE
                self.fallbacks += 1
                await asyncio.gather(*(self._fall_back(i, now) for i in items))
                return
            _fail(items, partial(_copy, err))
            return
        except BaseException as exc:  # cancelled (the gateway is stopping), or a fault of this process
            cancelled = isinstance(exc, asyncio.CancelledError)
            code = grpc.StatusCode.CANCELLED if cancelled else grpc.StatusCode.INTERNAL
            details = STOPPING if cancelled else "read batch failed"
            _fail(items, partial(_error, code, details))
            raise
        self.batched_items += len(items)
        for n, item in enumerate(items):
            if item.future.done():  # the request that waited went away
                continue
            if n >= len(response.results):
                item.future.set_exception(_error(grpc.StatusCode.INTERNAL, "the node's batch answer is short"))
                continue
            result = response.results[n]
            if result.code == 0:
                item.future.set_result((result.response, height_of(result.trailers)))
            else:
                code = STATUS.get(result.code, grpc.StatusCode.UNKNOWN)
                trailers = tuple((t.key, t.value) for t in result.trailers)
                item.future.set_exception(_error(code, result.details, trailers))

    async def _fall_back(self, item: _Item, now: float) -> None:
        """One item of a batch the node did not take, as a direct call."""
        try:
            raw = await self.direct_answer(item.method, item.request, max(0.001, item.deadline - now))
        except grpc.aio.AioRpcError as err:
            if not item.future.done():
                item.future.set_exception(err)
            return
        if not item.future.done():
            item.future.set_result(raw)
