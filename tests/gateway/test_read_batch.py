"""The internal ReadBatch RPC (node/server/rpc/read_batch.py) and the gateway's coalescing
(gateway/upstream/batching.py), over real sockets against a real chain-node.

- The node answers each item exactly as a direct call of that method: the same response bytes, or the same
  status, details and trailers; one item's failure is its own; a method that is not a read is refused per
  item; an item whose deadline has passed answers DEADLINE_EXCEEDED.
- The gateway's answers with batching equal its answers without (`--read-batch 0`), for reads that succeed,
  reads the node refuses (404 with a reason, 400 naming the field) and requests the gateway refuses itself.
- A node without the RPC (a relay of the public surface only: an older node) makes the gateway fall back
  to direct calls, with the same answers. (The batches go on the node's ReadStream when it has one:
  tests/gateway/test_readstream.py, tests/node/server/test_read_stream.py.)
- While one of two nodes stops (a rolling restart), every GET through the gateway is answered.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from chain.v1 import read_batch_service_pb2 as pb
from chain.v1 import rpc_pb2
from gateway.app import build_app
from gateway.keys import NODES
from node.server.readers.relay import Relay
from tests.fixtures.actors import new_account
from tests.fixtures.nodeproc import NodeProcess
from tests.gateway.conftest import MakeClient, gateway_config

CHAIN = "/chain.v1.ChainService/"
KEYCHAIN = "/chain.v1.KeychainService/"


@pytest.fixture(scope="module")
def alice(node: NodeProcess) -> bytes:
    return new_account(node.client(), node.authority()).address


def _item(method: str, request: Any) -> pb.ReadBatchItem:
    return pb.ReadBatchItem(method=method, request=request.SerializeToString())


def _items(alice: bytes) -> list[pb.ReadBatchItem]:
    unknown = bytes(range(20))
    return [
        _item(CHAIN + "GetAccount", rpc_pb2.GetAccountRequest(owner_address=alice)),
        _item(CHAIN + "GetAccount", rpc_pb2.GetAccountRequest(owner_address=unknown)),
        _item(KEYCHAIN + "GetCustodyKey", rpc_pb2.GetCustodyKeyRequest(owner_address=alice, key_id=b"\x01" * 32)),
        _item(
            CHAIN + "GetAccountActivity",
            rpc_pb2.GetAccountActivityRequest(owner_address=alice, page_token="not-a-cursor"),
        ),
        pb.ReadBatchItem(method=CHAIN + "GetProjectByName", request=b"\xff\xff\xff"),  # does not decode
        pb.ReadBatchItem(method=CHAIN + "GetChainStats", request=b""),
        _item(CHAIN + "GetProjectByName", rpc_pb2.GetProjectByNameRequest(owner_address=alice, name="nothing-here")),
    ]


async def _direct(channel: grpc.aio.Channel, item: pb.ReadBatchItem) -> tuple[int, str, tuple[Any, ...], bytes]:
    call = channel.unary_unary(item.method, None, None)
    try:
        raw: bytes = await call(item.request, timeout=10)
    except grpc.aio.AioRpcError as err:
        metadata: Any = err.trailing_metadata() or ()
        trailers = tuple((k, v) for k, v in metadata)
        return err.code().value[0], err.details() or "", trailers, b""
    return 0, "", (), raw


def _outcome(result: pb.ReadBatchResult) -> tuple[int, str, tuple[Any, ...], bytes]:
    """The result as `_direct` gives it: a success's `chain-height` trailer (the height it was read at; a block
    may land between the two calls) is checked on its own."""
    trailers = tuple((t.key, t.value) for t in result.trailers if t.key != "chain-height")
    return result.code, result.details, trailers, result.response


async def _batch(channel: grpc.aio.Channel, items: list[pb.ReadBatchItem]) -> pb.ReadBatchResponse:
    call = channel.unary_unary(
        "/chain.v1.ReadBatchService/ReadBatch",
        request_serializer=pb.ReadBatchRequest.SerializeToString,
        response_deserializer=pb.ReadBatchResponse.FromString,
    )
    response: pb.ReadBatchResponse = await call(pb.ReadBatchRequest(items=items), timeout=30)
    return response


async def test_each_item_is_answered_as_a_direct_call(node: NodeProcess, alice: bytes) -> None:
    items = _items(alice)
    async with grpc.aio.insecure_channel(node.internal_target) as channel:
        batch = await _batch(channel, items)
        direct = [await _direct(channel, i) for i in items]
    got = [_outcome(r) for r in batch.results]
    assert got == direct
    assert all(any(t.key == "chain-height" for t in r.trailers) for r in batch.results if r.code == 0)
    codes = [g[0] for g in got]
    # the failures are the items' own: the reads around them succeed
    assert codes[0] == codes[1] == codes[5] == 0
    assert grpc.StatusCode.NOT_FOUND.value[0] in codes
    assert grpc.StatusCode.INVALID_ARGUMENT.value[0] in codes
    assert all(any(k == "reason-code" for k, _ in g[2]) for g in got if g[0] != 0)


async def test_only_reads_are_batched(node: NodeProcess, alice: bytes) -> None:
    submit = pb.ReadBatchItem(
        method=CHAIN + "SubmitMessage", request=rpc_pb2.SubmitMessageRequest().SerializeToString()
    )
    stream = pb.ReadBatchItem(method=CHAIN + "SubscribeBlocks", request=b"")
    async with grpc.aio.insecure_channel(node.internal_target) as channel:
        batch = await _batch(channel, [submit, stream, _items(alice)[0]])
    assert [r.code for r in batch.results] == [grpc.StatusCode.UNIMPLEMENTED.value[0]] * 2 + [0]
    assert "not a batchable read" in batch.results[0].details


async def test_an_item_past_its_deadline_alone_fails(node: NodeProcess, alice: bytes) -> None:
    first = _items(alice)[0]
    # many reads first, so the last item's 1 ms from the batch's receipt has passed when its turn comes
    late = pb.ReadBatchItem(method=first.method, request=first.request, timeout_ms=1)
    async with grpc.aio.insecure_channel(node.internal_target) as channel:
        batch = await _batch(channel, [first] * 2000 + [late])
    assert all(r.code == 0 for r in batch.results[:-1])
    assert batch.results[-1].code == grpc.StatusCode.DEADLINE_EXCEEDED.value[0]
    assert batch.results[-1].response == b""


def _paths(alice: bytes) -> list[str]:
    a = "0x" + alice.hex()
    return [
        f"/v1/accounts/{a}",
        f"/v1/accounts/0x{bytes(range(20)).hex()}",
        f"/v1/accounts/{a}/custody-keys",
        f"/v1/accounts/{a}/custody-keys/0x{'01' * 32}",
        f"/v1/accounts/{a}/activity?cursor=not-a-cursor",
        f"/v1/accounts/{a}/keys",
        f"/v1/accounts/{a}/projects/nothing-here",
        "/v1/accounts/0xzz",
    ]


async def _answers(client: Any, paths: list[str]) -> list[tuple[int, bytes]]:
    async def one(path: str) -> tuple[int, bytes]:
        async with client.get(path) as resp:
            return resp.status, await resp.read()

    return list(await asyncio.gather(*(one(p) for p in paths * 4)))


async def test_gateway_answers_equal_with_and_without_batching(make_gateway_client: MakeClient, alice: bytes) -> None:
    paths = _paths(alice)
    batched = await make_gateway_client(read_batch=64)
    plain = await make_gateway_client(read_batch=0)
    with_batch = await _answers(batched, paths)
    without = await _answers(plain, paths)
    assert with_batch == without
    statuses = {s for s, _ in with_batch}
    assert {200, 400, 404} <= statuses
    assert batched.app[NODES].readers[0].batcher.batched_items > 0
    assert batched.app[NODES].readers[0].batcher.streamed > 0  # on the node's ReadStream
    assert plain.app[NODES].readers[0].batcher.batched_items == 0


async def test_without_an_internal_address_reads_are_plain_calls(make_gateway_client: MakeClient, alice: bytes) -> None:
    """No --node-internal-addr: each read is its own call on the public address (which serves no ReadBatch)."""
    paths = _paths(alice)
    public = await make_gateway_client(node_internal_addrs=(), read_batch=64)
    batched = await make_gateway_client(read_batch=64)
    assert await _answers(public, paths) == await _answers(batched, paths)
    pool = public.app[NODES]
    assert pool.readers == pool.upstreams
    batcher = pool.readers[0].batcher
    assert (batcher.batched_items, batcher.streamed, batcher.fallbacks) == (0, 0, 0)


@pytest.fixture
async def older_node(node: NodeProcess) -> AsyncIterator[str]:
    """A node's public surface without ReadBatch: every public method relayed to the real node."""
    relay = Relay(node.grpc_target, 64 * 1024 * 1024)
    table = {p: h for p in relay.paths() if (h := relay.handler(p)) is not None}

    class Routes(grpc.GenericRpcHandler):  # type: ignore[type-arg]
        def service(self, details: grpc.HandlerCallDetails) -> Any:
            return table.get(details.method)

    server = grpc.aio.server()
    server.add_generic_rpc_handlers((Routes(),))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        await server.stop(None)
        await relay.close()


async def test_a_node_without_the_rpc_gets_direct_calls(
    make_gateway_client: MakeClient, alice: bytes, older_node: str
) -> None:
    paths = _paths(alice)
    old = await make_gateway_client(node_addrs=(older_node,), node_internal_addrs=(older_node,), read_batch=64)
    plain = await make_gateway_client(read_batch=0)
    assert await _answers(old, paths) == await _answers(plain, paths)
    batcher = old.app[NODES].readers[0].batcher
    assert batcher.fallbacks > 0  # the node said UNIMPLEMENTED once; its items went direct
    assert batcher.batched_items == 0


def test_read_workers_answer_the_batch_themselves(tmp_path: Any) -> None:
    """With --read-workers, the worker holding the connection answers ReadBatch from its own store."""
    node = NodeProcess(tmp_path / "node", "--read-workers", "1").start()
    try:
        alice = new_account(node.client(), node.authority()).address

        async def both() -> tuple[list[Any], list[Any]]:
            items = _items(alice)
            async with grpc.aio.insecure_channel(node.internal_target) as channel:
                batch = await _batch(channel, items)
                return [_outcome(r) for r in batch.results], [await _direct(channel, i) for i in items]

        got, direct = asyncio.run(both())
        assert got == direct
        assert got[0][0] == 0 and got[0][3]  # the account read answered
    finally:
        node.stop()


async def test_reads_go_on_while_a_node_stops(tmp_path: Path, aiohttp_client: Any) -> None:
    """A rolling restart seen by the gateway: while one of its two nodes stops, every GET is answered. The
    stopping node ends the gateway's read stream, what the stream had not answered goes as calls, which
    the stopping node refuses (UNAVAILABLE), and those are retried on the other node."""
    stopping = NodeProcess(tmp_path / "a", "--drain-seconds", "0.3").start()
    other = NodeProcess(tmp_path / "b").start()
    try:
        addrs = (stopping.grpc_target, other.grpc_target)
        internal = (stopping.internal_target, other.internal_target)
        config = gateway_config(stopping, node_addrs=addrs, node_internal_addrs=internal, read_retries=2)
        client = await aiohttp_client(build_app(config))
        path = "/v1/accounts/0x" + "11" * 20  # any address is an account, on either chain
        statuses: list[int] = []
        done = asyncio.Event()

        async def read() -> None:
            while not done.is_set():
                async with client.get(path) as response:
                    await response.read()
                    statuses.append(response.status)

        readers = [asyncio.create_task(read()) for _ in range(8)]
        await asyncio.sleep(1.0)
        streamed = client.app[NODES].readers[0].batcher.streamed
        assert await asyncio.to_thread(stopping.stop) == 0  # SIGTERM: drain, end the streams, stop
        await asyncio.sleep(0.5)  # and on after it is gone
        done.set()
        await asyncio.gather(*readers)
        assert streamed > 0  # the stopping node was answering on its stream
        assert len(statuses) > 100 and set(statuses) == {200}, sorted(set(statuses))
    finally:
        stopping.stop()
        other.stop()
