"""The gateway's ReadStream (gateway/upstream/readstream.py), driven through the ReadBatcher, against ReadBatchService
servers over real loopback sockets whose streams answer, hold, end or fail as each test needs: batches share
one stream; what a stream cannot answer goes as a ReadBatch call, whether the node ended it, never had it,
or it broke; a batch nobody answers fails at its deadline."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc
import pytest

from chain.v1 import read_batch_service_pb2 as pb
from chain.v1 import read_batch_service_pb2_grpc as pb_grpc
from gateway.upstream.batching import STOPPING, ReadBatcher
from gateway.upstream.readstream import BACKOFF

METHOD = "/chain.v1.ChainService/GetAccount"


def echo(batch: pb.ReadBatchRequest) -> pb.ReadBatchResponse:
    return pb.ReadBatchResponse(results=[pb.ReadBatchResult(response=i.request) for i in batch.items])


class Node(pb_grpc.ReadBatchServiceServicer):
    """Echoes each item's request bytes; `stream` says what ReadStream does with each request it reads
    (answer it: return its answer; hold it: never return; end the stream: return None)."""

    def __init__(self, stream: Callable[[pb.ReadStreamRequest], Awaitable[pb.ReadStreamResponse | None]]) -> None:
        self.stream = stream
        self.calls = 0  # ReadBatch calls
        self.streams = 0  # ReadStream calls
        self.received = asyncio.Event()  # a stream request arrived

    async def ReadBatch(self, request: pb.ReadBatchRequest, context: object) -> pb.ReadBatchResponse:
        self.calls += 1
        return echo(request)

    async def ReadStream(self, requests: AsyncIterator[pb.ReadStreamRequest], context: Any) -> Any:
        self.streams += 1
        async for request in requests:
            self.received.set()
            out = await self.stream(request)
            if out is None:
                return
            yield out


class OlderNode(pb_grpc.ReadBatchServiceServicer):
    """A node from before ReadStream: only ReadBatch (the base class answers UNIMPLEMENTED)."""

    def __init__(self) -> None:
        self.calls = 0

    async def ReadBatch(self, request: pb.ReadBatchRequest, context: object) -> pb.ReadBatchResponse:
        self.calls += 1
        return echo(request)


async def answer(request: pb.ReadStreamRequest) -> pb.ReadStreamResponse:
    return pb.ReadStreamResponse(id=request.id, batch=echo(request.batch))


Serve = Callable[[pb_grpc.ReadBatchServiceServicer], Awaitable[grpc.aio.Channel]]


@pytest.fixture
async def serve() -> AsyncIterator[Serve]:
    """Starts a server for a servicer; its channel. Both closed at the end."""
    servers: list[grpc.aio.Server] = []
    channels: list[grpc.aio.Channel] = []

    async def start(servicer: pb_grpc.ReadBatchServiceServicer) -> grpc.aio.Channel:
        server = grpc.aio.server()
        pb_grpc.add_ReadBatchServiceServicer_to_server(servicer, server)
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        servers.append(server)
        channels.append(grpc.aio.insecure_channel(f"127.0.0.1:{port}"))
        return channels[-1]

    try:
        yield start
    finally:
        for channel in channels:
            await channel.close(grace=None)
        for server in servers:
            await server.stop(None)


async def test_batches_share_one_stream(serve: Serve) -> None:
    node = Node(answer)
    batcher = ReadBatcher(await serve(node), max_items=64)
    for i in range(5):
        assert await asyncio.wait_for(batcher.call(METHOD, bytes([i]), 10), 5) == bytes([i])
    assert (node.streams, node.calls, batcher.streamed) == (1, 0, 5)


async def test_a_batch_the_node_ended_its_stream_on_goes_as_a_call(serve: Serve) -> None:
    async def stop(_request: pb.ReadStreamRequest) -> None:
        return None  # the node is stopping: it ends the stream (status OK) without answering

    node = Node(stop)
    batcher = ReadBatcher(await serve(node), max_items=64)
    assert await asyncio.wait_for(batcher.call(METHOD, b"a", 10), 5) == b"a"  # answered by a ReadBatch call
    assert (node.streams, node.calls, batcher.streamed) == (1, 1, 0)
    assert await asyncio.wait_for(batcher.call(METHOD, b"b", 10), 5) == b"b"
    assert node.streams == 2  # the ended stream is replaced by the next batch


async def test_a_node_without_the_stream_gets_batch_calls(serve: Serve) -> None:
    node = OlderNode()  # type: ignore[abstract]  # ReadStream left out on purpose
    batcher = ReadBatcher(await serve(node), max_items=64)
    assert await asyncio.wait_for(batcher.call(METHOD, b"a", 10), 5) == b"a"
    assert await asyncio.wait_for(batcher.call(METHOD, b"b", 10), 5) == b"b"
    assert (node.calls, batcher.streamed, batcher.fallbacks) == (2, 0, 0)
    stream = batcher._stream
    assert stream is not None and stream.opened == 1  # refused once: not tried again for REPROBE seconds


async def test_an_unanswered_batch_fails_at_its_deadline_and_the_stream_goes_on(serve: Serve) -> None:
    held = asyncio.Event()

    async def hold_first(request: pb.ReadStreamRequest) -> pb.ReadStreamResponse:
        if not held.is_set():
            held.set()
            await asyncio.sleep(1.0)  # answered after the read's deadline: the answer is dropped
        return await answer(request)

    node = Node(hold_first)
    batcher = ReadBatcher(await serve(node), max_items=64)
    with pytest.raises(grpc.aio.AioRpcError) as late:
        await asyncio.wait_for(batcher.call(METHOD, b"a", 0.3), 5)
    assert late.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert await asyncio.wait_for(batcher.call(METHOD, b"b", 10), 5) == b"b"
    assert (node.streams, node.calls) == (1, 0)


async def test_a_stream_that_breaks_sends_its_batches_as_calls(serve: Serve) -> None:
    """Whatever status the stream ends with, its unanswered batches go as ReadBatch calls, whose outcome is
    theirs: the stream decides no failure itself."""
    broke = False

    class Breaks(Node):
        async def ReadStream(self, requests: AsyncIterator[pb.ReadStreamRequest], context: Any) -> Any:
            nonlocal broke
            self.streams += 1
            async for request in requests:
                if not broke:
                    broke = True
                    await context.abort(grpc.StatusCode.INTERNAL, "stream broke")
                yield await answer(request)

    node = Breaks(answer)
    batcher = ReadBatcher(await serve(node), max_items=64)
    assert await asyncio.wait_for(batcher.call(METHOD, b"a", 10), 5) == b"a"  # by a ReadBatch call
    assert (node.streams, node.calls, batcher.streamed) == (1, 1, 0)
    assert await asyncio.wait_for(batcher.call(METHOD, b"b", 10), 5) == b"b"
    assert (node.streams, node.calls, batcher.streamed) == (2, 1, 1)  # on a new stream


async def test_closing_the_channel_cancels_the_waiting_reads(serve: Serve) -> None:
    async def never(_request: pb.ReadStreamRequest) -> None:
        await asyncio.Event().wait()

    node = Node(never)
    channel = await serve(node)
    batcher = ReadBatcher(channel, max_items=64)
    read = asyncio.create_task(batcher.call(METHOD, b"a", 10))
    await asyncio.wait_for(node.received.wait(), 5)
    await channel.close(grace=None)  # the gateway stops
    with pytest.raises(grpc.aio.AioRpcError) as stopped:
        await asyncio.wait_for(read, 5)
    assert (stopped.value.code(), stopped.value.details()) == (grpc.StatusCode.CANCELLED, STOPPING)
    assert node.calls == 0


async def test_a_write_held_past_its_deadline_resets_the_stream(serve: Serve) -> None:
    """A node that stopped reading: the batch whose write is still held at its deadline fails with
    DEADLINE_EXCEEDED, and the stream is reset, so the batch queued behind it on that stream goes as a
    ReadBatch call (not failed as if the gateway were stopping) and the next batch gets a new stream."""

    class Deaf(Node):
        async def ReadStream(self, requests: AsyncIterator[pb.ReadStreamRequest], context: Any) -> Any:
            self.streams += 1
            if self.streams == 1:  # the first stream never reads its requests
                await asyncio.Event().wait()
            async for request in requests:
                yield await answer(request)

    node = Deaf(answer)
    batcher = ReadBatcher(await serve(node), max_items=64)
    big = bytes(32 * 1024 * 1024)  # more than the stream's flow-control window: its write cannot finish
    held = asyncio.create_task(batcher.call(METHOD, big, 0.5))
    await asyncio.sleep(0.1)  # a later loop turn: a second batch, queued behind the held write
    behind = asyncio.create_task(batcher.call(METHOD, b"b", 10))
    with pytest.raises(grpc.aio.AioRpcError) as late:
        await asyncio.wait_for(held, 5)
    assert late.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert await asyncio.wait_for(behind, 5) == b"b"
    assert node.calls == 1  # the batch behind went as a call
    assert await asyncio.wait_for(batcher.call(METHOD, b"c", 10), 5) == b"c"
    assert (node.streams, batcher.streamed) == (2, 1)  # on a new stream


async def test_streams_that_keep_failing_are_left_alone_for_a_while(serve: Serve) -> None:
    """From the second stream in a row that ends without an answer, the batches go as calls without a new
    stream for BACKOFF seconds (doubling with each further one); a stream that answers ends the run."""
    failing = True

    class Refuses(Node):
        async def ReadStream(self, requests: AsyncIterator[pb.ReadStreamRequest], context: Any) -> Any:
            self.streams += 1
            async for request in requests:
                if failing:
                    await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, "no room for a stream")
                yield await answer(request)

    node = Refuses(answer)
    batcher = ReadBatcher(await serve(node), max_items=64)
    stream = batcher._stream
    assert stream is not None

    async def read(n: int) -> None:
        assert await asyncio.wait_for(batcher.call(METHOD, bytes([n]), 10), 5) == bytes([n])

    for n in range(6):  # every read answered, by a call
        await read(n)
    assert (node.streams, node.calls, batcher.streamed, stream.barren) == (2, 6, 0, 2)  # two tries, then calls
    loop = asyncio.get_running_loop()
    await asyncio.sleep(stream.refused_until - loop.time() + 0.05)
    await read(6)
    await read(7)
    assert (node.streams, node.calls, stream.barren) == (3, 8, 3)  # one more try, then calls again
    assert stream.refused_until - loop.time() > BACKOFF  # for twice as long
    await read(8)
    assert node.streams == 3
    failing = False
    await asyncio.sleep(stream.refused_until - loop.time() + 0.05)
    for n in range(9, 12):
        await read(n)
    assert (node.streams, node.calls, batcher.streamed, stream.barren) == (4, 9, 3, 0)  # a stream again
