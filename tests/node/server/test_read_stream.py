"""The node's ReadStream (node/server/rpc/read_batch.py): each request answered, in order, with its id and
what ReadBatch answers; `close()` ends a busy stream once its answer is written and an idle one at once,
both with status OK, and a stream opened after it ends at once; a node told to stop (SIGTERM) ends the
gateways' streams that way instead of leaving them to be cut at the end of its server's grace, whether the
main process or a read worker holds the connection."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from chain.v1 import read_batch_service_pb2 as pb
from chain.v1 import rpc_pb2
from node.server.rpc.read_batch import ReadBatchServicer, add_read_batch
from tests.fixtures.actors import new_account
from tests.fixtures.nodeproc import NodeProcess

SLOW = "/test.Reads/Slow"


def stream_of(channel: grpc.aio.Channel) -> Any:
    start: Any = channel.stream_stream(
        "/chain.v1.ReadBatchService/ReadStream",
        request_serializer=pb.ReadStreamRequest.SerializeToString,
        response_deserializer=pb.ReadStreamResponse.FromString,
    )
    return start()


def request(ident: int, *items: pb.ReadBatchItem) -> pb.ReadStreamRequest:
    return pb.ReadStreamRequest(id=ident, batch=pb.ReadBatchRequest(items=items))


class Slow:
    """A read that answers its request bytes once `release` is set."""

    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.release = asyncio.Event()

    async def __call__(self, message: bytes, context: object) -> bytes:
        self.entered.set()
        await self.release.wait()
        return message


@pytest.fixture
async def served() -> AsyncIterator[tuple[ReadBatchServicer, Slow, grpc.aio.Channel]]:
    slow = Slow()
    server = grpc.aio.server()
    servicer = add_read_batch(server, {SLOW: grpc.unary_unary_rpc_method_handler(slow)})
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            yield servicer, slow, channel
    finally:
        slow.release.set()
        await server.stop(None)


async def test_close_ends_a_busy_stream_after_its_answer_and_an_idle_one_at_once(
    served: tuple[ReadBatchServicer, Slow, grpc.aio.Channel],
) -> None:
    servicer, slow, channel = served
    busy, idle = stream_of(channel), stream_of(channel)
    await idle.write(request(1, pb.ReadBatchItem(method="/test.Reads/Unknown")))
    assert (await asyncio.wait_for(idle.read(), 5)).batch.results[0].code == grpc.StatusCode.UNIMPLEMENTED.value[0]
    await busy.write(request(7, pb.ReadBatchItem(method=SLOW, request=b"x")))
    await asyncio.wait_for(slow.entered.wait(), 5)
    servicer.close()
    assert await asyncio.wait_for(idle.code(), 5) == grpc.StatusCode.OK  # ended while it waited
    slow.release.set()
    answer = await asyncio.wait_for(busy.read(), 5)
    assert (answer.id, answer.batch.results[0].response) == (7, b"x")  # the batch it was answering
    assert await asyncio.wait_for(busy.code(), 5) == grpc.StatusCode.OK
    late = stream_of(channel)
    await late.write(request(8, pb.ReadBatchItem(method=SLOW, request=b"y")))
    assert await asyncio.wait_for(late.code(), 5) == grpc.StatusCode.OK  # no stream starts after close
    assert late.done()


def _items(owner: bytes) -> list[pb.ReadBatchItem]:
    account = rpc_pb2.GetAccountRequest(owner_address=owner).SerializeToString()
    short = rpc_pb2.GetAccountRequest(owner_address=b"\x01").SerializeToString()
    chain = "/chain.v1.ChainService/"
    return [
        pb.ReadBatchItem(method=chain + "GetAccount", request=account),
        pb.ReadBatchItem(method=chain + "GetAccount", request=short),  # INVALID_ARGUMENT, with its trailers
        pb.ReadBatchItem(method=chain + "GetChainStats", request=b""),
    ]


def test_a_stopping_node_ends_the_stream_with_ok(tmp_path: Path) -> None:
    """Read streams are the internal listener's (the main process's, with read workers or without)."""
    node = NodeProcess(tmp_path / "node", "--drain-seconds", "0.3").start()
    try:
        items = _items(new_account(node.client(), node.authority()).address)

        async def run() -> tuple[list[pb.ReadStreamResponse], pb.ReadBatchResponse, grpc.StatusCode, float]:
            async with grpc.aio.insecure_channel(node.internal_target) as channel:  # read batches: internal
                batch = channel.unary_unary(
                    "/chain.v1.ReadBatchService/ReadBatch",
                    request_serializer=pb.ReadBatchRequest.SerializeToString,
                    response_deserializer=pb.ReadBatchResponse.FromString,
                )
                expected = await batch(pb.ReadBatchRequest(items=items), timeout=10)
                stream = stream_of(channel)
                answers = []
                for ident in (3, 4, 5):
                    await stream.write(request(ident, *items))
                for _ in range(3):
                    answers.append(await asyncio.wait_for(stream.read(), 10))
                loop = asyncio.get_running_loop()
                signalled = loop.time()
                node.signal(signal.SIGTERM)
                code = await asyncio.wait_for(stream.code(), 30)
                return answers, expected, code, loop.time() - signalled

        answers, expected, code, took = asyncio.run(run())
        assert [a.id for a in answers] == [3, 4, 5]
        assert all(a.batch == expected for a in answers)
        assert expected.results[0].code == 0 and expected.results[1].code == grpc.StatusCode.INVALID_ARGUMENT.value[0]
        assert code == grpc.StatusCode.OK, code  # ended by the node, not cut at the end of the server's grace
        assert took < 10
    finally:
        assert node.stop() == 0
