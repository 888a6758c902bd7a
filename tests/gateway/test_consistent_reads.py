"""Consistent reads through the REST gateway (docs/rest.md, "Read consistency"): every read names the height
it was read at (`Chain-Height`), batched or as a direct call; `Chain-Min-Height` and
`Chain-Read-Consistency` go to the node as the metadata of the same names, so the node's answers come back
as HTTP: a height not reached by the deadline is 503 HEIGHT_NOT_REACHED with Retry-After, a bad value 400."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from chain.v1 import rpc_pb2
from tests.fixtures.actors import new_account
from tests.fixtures.nodeproc import NodeProcess
from tests.gateway.conftest import MakeClient

BATCHING = pytest.mark.parametrize("read_batch", [64, 0], ids=["batched", "direct"])


@pytest.fixture(scope="module")
def alice(node: NodeProcess) -> Any:
    return new_account(node.client(), node.authority())


def _height(node: NodeProcess) -> int:
    with node.client(timeout=10) as c:
        return int(c.stub.GetNodeStatus(rpc_pb2.GetNodeStatusRequest(), timeout=10).status.block_height)


@BATCHING
async def test_every_read_names_its_height(
    make_gateway_client: MakeClient, node: NodeProcess, alice: Any, read_batch: int
) -> None:
    client = await make_gateway_client(read_batch=read_batch)
    before = _height(node)
    for path in (f"/v1/accounts/0x{alice.address.hex()}", "/v1/blocks/0", "/v1/node/status"):
        async with client.get(path) as resp:
            assert resp.status == 200, await resp.text()
            assert before <= int(resp.headers["Chain-Height"]) <= _height(node)


@BATCHING
async def test_a_height_not_reached_is_503_with_a_retry_hint(
    make_gateway_client: MakeClient, node: NodeProcess, alice: Any, read_batch: int
) -> None:
    client = await make_gateway_client(read_batch=read_batch, request_timeout=2.0, read_retries=0)
    wanted = str(_height(node) + 10_000)
    async with client.get(f"/v1/accounts/0x{alice.address.hex()}", headers={"Chain-Min-Height": wanted}) as resp:
        body = await resp.json()
        assert resp.status == 503, body
        assert body["error"]["code"] == "HEIGHT_NOT_REACHED"
        assert "Retry-After" in resp.headers


async def test_a_read_at_the_next_height_waits_for_it(
    make_gateway_client: MakeClient, node: NodeProcess, alice: Any
) -> None:
    client = await make_gateway_client(request_timeout=30.0)
    wanted = _height(node) + 1
    headers = {"Chain-Min-Height": str(wanted)}
    read = asyncio.ensure_future(client.get(f"/v1/accounts/0x{alice.address.hex()}", headers=headers))
    with node.client(timeout=30) as c:
        await asyncio.to_thread(c.commit, alice.b.follow(b"\x07" * 20))
    async with await read as resp:
        assert resp.status == 200, await resp.text()
        assert int(resp.headers["Chain-Height"]) >= wanted


@pytest.mark.parametrize(
    ("header", "value", "field"),
    [
        ("Chain-Min-Height", "abc", "chain-min-height"),
        ("Chain-Min-Height", "-2", "chain-min-height"),
        ("Chain-Read-Consistency", "eventual", "chain-read-consistency"),
        ("Chain-Min-Height", "\u00e9", "chain-min-height"),
    ],
)
async def test_a_value_it_cannot_take_is_400(
    make_gateway_client: MakeClient, alice: Any, header: str, value: str, field: str
) -> None:
    client = await make_gateway_client()
    async with client.get(f"/v1/accounts/0x{alice.address.hex()}", headers={header: value}) as resp:
        body = await resp.json()
        assert resp.status == 400, body
        assert body["error"]["code"] == "INVALID_ARGUMENT"
        assert body["error"]["details"]["field"] == field


async def test_a_linearizable_read_answers_on_a_solo_node(make_gateway_client: MakeClient, alice: Any) -> None:
    client = await make_gateway_client()
    headers = {"Chain-Read-Consistency": "linearizable"}
    async with client.get(f"/v1/accounts/0x{alice.address.hex()}", headers=headers) as resp:
        assert resp.status == 200, await resp.text()
        assert int(resp.headers["Chain-Height"]) >= 1
