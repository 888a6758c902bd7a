"""The internal ReadBatch RPC (chain.v1.ReadBatchService): many reads in one call, for the gateway.

Not part of the public interface. The gateway coalesces the REST reads that arrive together into one call
(gateway/upstream/batching.py) instead of paying one gRPC round trip each. Every item names a pure read method of
ChainService or KeychainService and is answered by that method's own handler, in this process, wrapped
by the same interceptors the server runs per call (the error mapping, the RPC metrics): the same response
bytes and trailers (`chain-height`), or the same status, details and trailing metadata (`reason-code`,
`field`, ...). Items are
answered one after the other; one item's failure is its own result, never the batch's.

A method that is not a batchable read answers UNIMPLEMENTED for that item. An item's `timeout_ms` is its
own deadline from the batch's receipt: an item whose deadline has passed before it runs, or whose answer
comes after it, answers DEADLINE_EXCEEDED (what a direct call would have seen).

ReadStream carries the same batches over one long-lived call per gateway connection (a stream message
costs this side about a third of a unary call): each request is answered, in
order, by one response echoing its id. `close()` (the node's stop, before its gRPC server's) ends every
stream with status OK once the batch it is answering is written; an idle stream ends at once. The gateway
sends what it had not had answered as ReadBatch calls, which the stopping server refuses as it refuses any
new call (UNAVAILABLE), so they are retried on another node.

    batches = add_read_batch(server, {path: handler, ...})   # node/server/listeners.py, readers/worker.py
    ...
    batches.close(); await server.stop(grace)
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

import grpc

from chain.v1 import read_batch_service_pb2 as pb
from chain.v1 import read_batch_service_pb2_grpc as pb_grpc
from node.errors import DEADLINE_DETAILS
from node.grpcweb.context import GrpcWebServicerContext
from node.grpcweb.wire import Metadata

if TYPE_CHECKING:
    Handler = grpc.RpcMethodHandler[Any, Any]
    HandlerCallDetails = grpc.HandlerCallDetails
    Interceptor = grpc.aio.ServerInterceptor[Any, Any]
    ServicerContext = grpc.aio.ServicerContext[pb.ReadBatchRequest, pb.ReadBatchResponse]
    StreamContext = grpc.aio.ServicerContext[pb.ReadStreamRequest, pb.ReadStreamResponse]
else:
    Handler = grpc.RpcMethodHandler
    HandlerCallDetails = grpc.HandlerCallDetails
    Interceptor = grpc.aio.ServerInterceptor
    ServicerContext = grpc.aio.ServicerContext
    StreamContext = grpc.aio.ServicerContext

log = logging.getLogger("chain.rpc")
PATH = "/chain.v1.ReadBatchService/ReadBatch"


class _NoSink:
    """Unary reads send nothing before they return."""

    async def send_initial_metadata(self, metadata: Metadata) -> None:
        return None

    async def send_message(self, message: Any) -> None:
        return None


class _Details(HandlerCallDetails):
    def __init__(self, method: str) -> None:
        self.method = method
        self.invocation_metadata = ()


def _constant(handler: Handler) -> Callable[[HandlerCallDetails], Awaitable[Handler]]:
    async def continuation(_details: HandlerCallDetails) -> Handler:
        return handler

    return continuation


async def intercepted(handlers: Mapping[str, Handler], interceptors: Iterable[Interceptor]) -> dict[str, Handler]:
    """Each handler wrapped once by `interceptors` (innermost first), as the server would per call."""
    chain = tuple(interceptors)
    out: dict[str, Handler] = {}
    for path, handler in handlers.items():
        current = handler
        for interceptor in chain:
            wrapped = await interceptor.intercept_service(_constant(current), _Details(path))
            current = wrapped if wrapped is not None else current
        out[path] = current
    return out


def _failed(code: grpc.StatusCode, details: str, trailers: Metadata = ()) -> pb.ReadBatchResult:
    return pb.ReadBatchResult(
        code=code.value[0],
        details=details,
        trailers=[pb.ReadBatchTrailer(key=k, value=v if isinstance(v, str) else v.decode()) for k, v in trailers],
    )


class ReadBatchServicer(pb_grpc.ReadBatchServiceServicer):
    def __init__(self, handlers: Mapping[str, Handler]) -> None:
        # only unary handlers: a stream cannot be one item's answer
        self._handlers = {p: h for p, h in handlers.items() if h.unary_unary is not None}
        self._closing = False
        self._idle: set[asyncio.Task[Any]] = set()  # the streams waiting for their next request

    def close(self) -> None:
        """End every ReadStream: an idle one now, a busy one once its answer is written; no stream starts."""
        self._closing = True
        for task in self._idle:
            task.cancel()  # caught in ReadStream, which returns: status OK

    async def ReadBatch(self, request: pb.ReadBatchRequest, context: ServicerContext) -> pb.ReadBatchResponse:
        out = pb.ReadBatchResponse()
        await self._answer(request, out)
        return out

    async def ReadStream(
        self, requests: AsyncIterator[pb.ReadStreamRequest], context: StreamContext
    ) -> AsyncIterator[pb.ReadStreamResponse]:
        task = asyncio.current_task()
        assert task is not None
        if self._closing:  # opened after close(): ends at once
            return
        incoming = aiter(requests)
        while not self._closing:
            self._idle.add(task)
            try:
                request = await anext(incoming)
            except StopAsyncIteration:  # the gateway closed its side
                return
            except asyncio.CancelledError:
                if self._closing:  # close() woke this idle stream: end it
                    task.uncancel()
                    return
                raise  # the call went away
            finally:
                self._idle.discard(task)
            out = pb.ReadStreamResponse(id=request.id)
            await self._answer(request.batch, out.batch)
            yield out

    async def _answer(self, request: pb.ReadBatchRequest, out: pb.ReadBatchResponse) -> None:
        loop = asyncio.get_running_loop()
        received = loop.time()
        add = out.results.add  # each result made in place (a list of results would be copied in)
        for item in request.items:
            answer = await self._one(item, received, loop)
            if isinstance(answer, tuple):
                result = add(response=answer[0])
                for key, value in answer[1]:  # `chain-height`: the height the answer was read at
                    result.trailers.add(key=key, value=value if isinstance(value, str) else value.decode())
            else:
                add().CopyFrom(answer)

    async def _one(
        self, item: pb.ReadBatchItem, received: float, loop: asyncio.AbstractEventLoop
    ) -> tuple[bytes, Metadata] | pb.ReadBatchResult:
        """The item's response bytes and trailers, or its failed result."""
        handler = self._handlers.get(item.method)
        if handler is None or handler.unary_unary is None:
            return _failed(grpc.StatusCode.UNIMPLEMENTED, f"{item.method} is not a batchable read")
        deadline = received + item.timeout_ms / 1000 if item.timeout_ms else None
        if deadline is not None and loop.time() >= deadline:
            return _failed(grpc.StatusCode.DEADLINE_EXCEEDED, DEADLINE_DETAILS)
        context = GrpcWebServicerContext(
            method=item.method,
            invocation_metadata=(),
            peer="read-batch",
            deadline=deadline,
            sink=_NoSink(),
            response_streaming=False,
        )
        deserialize = handler.request_deserializer
        try:
            message = deserialize(item.request) if deserialize is not None else item.request
            response = await handler.unary_unary(message, context)  # type: ignore[arg-type]  # an aio context
        except grpc.aio.AbortError:
            return _failed(context.code(), context.details(), context.trailing_metadata())
        except Exception:  # the error interceptor maps typed errors; this is a handler without it
            log.exception("%s failed in a read batch", item.method)
            return _failed(grpc.StatusCode.INTERNAL, "internal error")
        if deadline is not None and loop.time() > deadline:
            return _failed(grpc.StatusCode.DEADLINE_EXCEEDED, DEADLINE_DETAILS)
        serialize = handler.response_serializer
        answer: bytes = serialize(response) if serialize is not None else response
        return answer, context.trailing_metadata()


def add_read_batch(server: grpc.aio.Server, handlers: Mapping[str, Handler]) -> ReadBatchServicer:
    """Serve ReadBatch and ReadStream on `server`, answering items with `handlers` (already wrapped by the
    interceptors); the caller closes the servicer before it stops the server."""
    servicer = ReadBatchServicer(handlers)
    pb_grpc.add_ReadBatchServiceServicer_to_server(servicer, server)
    return servicer
