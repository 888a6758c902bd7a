"""The gateway's read coalescing (gateway/upstream/batching.py) against a ReadBatch server whose answers a test holds
back, over a real loopback socket: how many batch calls go out and what each carries. The batches go as
ReadBatch calls here (`stream=False`); tests/gateway/test_readstream.py covers the stream that carries
them by default."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import grpc
import pytest

from chain.v1 import read_batch_service_pb2 as pb
from chain.v1 import read_batch_service_pb2_grpc as pb_grpc
from gateway.upstream.batching import ReadBatcher

METHOD = "/chain.v1.ChainService/GetAccount"


class HeldBatches(pb_grpc.ReadBatchServiceServicer):
    """Echoes each item's request bytes as its response, once `release` is set; records each call's size."""

    def __init__(self) -> None:
        self.calls: list[int] = []
        self.release = asyncio.Event()

    async def ReadBatch(self, request: pb.ReadBatchRequest, context: object) -> pb.ReadBatchResponse:
        self.calls.append(len(request.items))
        await self.release.wait()
        return pb.ReadBatchResponse(results=[pb.ReadBatchResult(response=i.request) for i in request.items])


@pytest.fixture
async def held() -> AsyncIterator[tuple[HeldBatches, grpc.aio.Channel]]:
    servicer = HeldBatches()  # type: ignore[abstract]  # no ReadStream: these batches go as calls
    server = grpc.aio.server()
    pb_grpc.add_ReadBatchServiceServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            yield servicer, channel
    finally:
        servicer.release.set()
        await server.stop(None)


async def reads_in_separate_turns(batcher: ReadBatcher, servicer: HeldBatches, n: int) -> list[asyncio.Task[bytes]]:
    reads = []
    for i in range(n):
        reads.append(asyncio.create_task(batcher.call(METHOD, bytes([i]), 10)))
        await asyncio.sleep(0.1)  # this read's turn ends, and its call (if one goes) usually reaches the server
    return reads


async def calls_seen(servicer: HeldBatches, n: int, timeout: float = 10.0) -> list[int]:
    """The sizes of the calls the server has seen, once it has seen `n` (or what it saw by `timeout`): on a
    loaded machine a call can take longer than a read's turn to reach it."""
    deadline = asyncio.get_running_loop().time() + timeout
    while len(servicer.calls) < n and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.01)
    return list(servicer.calls)


async def settle(reads: list[asyncio.Task[bytes]]) -> None:
    """No read outlives its test: one left pending by a failed assertion is cancelled and awaited, so its
    error is not reported later, from the garbage collector, in the middle of another test."""
    for read in reads:
        read.cancel()
    await asyncio.gather(*reads, return_exceptions=True)


async def test_reads_wait_for_a_call_to_come_back_while_max_in_flight_are_out(
    held: tuple[HeldBatches, grpc.aio.Channel],
) -> None:
    servicer, channel = held
    batcher = ReadBatcher(channel, max_items=64, max_in_flight=2, stream=False)
    reads = await reads_in_separate_turns(batcher, servicer, 5)
    try:
        assert await calls_seen(servicer, 2) == [1, 1]  # two calls out; the three later reads wait
        servicer.release.set()
        assert await asyncio.gather(*reads) == [bytes([i]) for i in range(5)]
        assert servicer.calls == [1, 1, 3]  # and go together when one comes back
    finally:
        await settle(reads)


async def test_a_full_batch_goes_at_once_even_while_calls_are_out(held: tuple[HeldBatches, grpc.aio.Channel]) -> None:
    servicer, channel = held
    batcher = ReadBatcher(channel, max_items=2, max_in_flight=1, stream=False)
    reads = await reads_in_separate_turns(batcher, servicer, 3)  # 1 goes; 2 and 3 fill a batch
    try:
        assert await calls_seen(servicer, 2) == [1, 2]
        servicer.release.set()
        assert await asyncio.gather(*reads) == [bytes([i]) for i in range(3)]
    finally:
        await settle(reads)


async def test_a_lone_read_does_not_wait_when_nothing_is_out(held: tuple[HeldBatches, grpc.aio.Channel]) -> None:
    servicer, channel = held
    servicer.release.set()
    batcher = ReadBatcher(channel, max_items=64, max_in_flight=1, stream=False)
    for i in range(3):
        assert await asyncio.wait_for(batcher.call(METHOD, bytes([i]), 10), 5) == bytes([i])
    assert servicer.calls == [1, 1, 1]
