"""The gRPC-web passthrough (`/v1/grpc-web/{service}/{method}`) and CORS, against a real node.

The passthrough tests run twice: forwarded to the node's gRPC-web listener (`--node-web-url`), and bridged
onto the node's native gRPC (no `--node-web-url`); both must answer alike."""

from __future__ import annotations

import asyncio
import base64
import os
from typing import Any

import pytest
import requests
from aiohttp.test_utils import TestClient

from chain.v1 import rpc_pb2
from tests.fixtures.actors import authority_builder
from tests.fixtures.gwproc import GatewayProcess
from tests.fixtures.nodeproc import NodeProcess
from tests.gateway.conftest import ORIGIN, MakeClient
from tests.gateway.grpcweb_frames import GRPC_WEB, frame, unary

Client = TestClient[Any, Any]
SERVICE = "/v1/grpc-web/chain.v1.ChainService"
PROTOBUF = {"Content-Type": "application/x-protobuf"}


@pytest.fixture(params=["node-web", "native"])
async def passthrough(request: pytest.FixtureRequest, make_gateway_client: MakeClient) -> Client:
    """A gateway whose passthrough forwards to the node's gRPC-web listener, or bridges to native gRPC."""
    if request.param == "native":
        return await make_gateway_client(node_web_url="")
    return await make_gateway_client()


async def test_unary_call_through_the_passthrough(passthrough: Client) -> None:
    resp = await passthrough.post(f"{SERVICE}/GetNodeStatus", data=frame(b""), headers=GRPC_WEB)
    assert resp.status == 200
    assert resp.headers["Content-Type"] == "application/grpc-web+proto"
    message, trailers = unary(await resp.read())
    assert "grpc-status:0" in trailers.replace(" ", "")
    status = rpc_pb2.GetNodeStatusResponse.FromString(message).status
    assert status.network == "devnet" and status.role == "solo"


async def test_text_mode_is_passed_through_unchanged(passthrough: Client) -> None:
    body = base64.b64encode(frame(rpc_pb2.GetChainStatsRequest().SerializeToString()))
    headers = {"Content-Type": "application/grpc-web-text", "X-Grpc-Web": "1"}
    resp = await passthrough.post(f"{SERVICE}/GetChainStats", data=body, headers=headers)
    assert resp.status == 200 and resp.headers["Content-Type"] == "application/grpc-web-text"
    raw = await resp.read()
    decoded = b"".join(base64.b64decode(chunk + b"=" * (-len(chunk) % 4)) for chunk in raw.split(b"=") if chunk)
    message, trailers = unary(decoded)
    assert "grpc-status:0" in trailers.replace(" ", "")
    assert rpc_pb2.GetChainStatsResponse.FromString(message).HasField("stats")


async def test_errors_arrive_as_grpc_trailers_with_cors(passthrough: Client) -> None:
    req = rpc_pb2.GetProjectRequest(project_id=bytes(32)).SerializeToString()
    resp = await passthrough.post(f"{SERVICE}/GetProject", data=frame(req), headers={**GRPC_WEB, "Origin": ORIGIN})
    assert resp.status == 200  # gRPC-web: the status is in grpc-status
    assert resp.headers["grpc-status"] == "5" and resp.headers["reason-code"] == "NOT_FOUND"
    assert resp.headers["Access-Control-Allow-Origin"] == ORIGIN
    exposed = resp.headers["Access-Control-Expose-Headers"]
    assert "grpc-status" in exposed and "reason-code" in exposed
    unknown = await passthrough.post(f"{SERVICE}/NoSuchMethod", data=frame(b""), headers=GRPC_WEB)
    assert unknown.status == 200 and unknown.headers["grpc-status"] == "12"
    admin = await passthrough.post(
        "/v1/grpc-web/chain.v1.AdminService/CreateSnapshot", data=frame(b""), headers=GRPC_WEB
    )
    assert admin.status == 200 and admin.headers["grpc-status"] == "12"  # never reachable from the public side
    two = await passthrough.post(f"{SERVICE}/GetNodeStatus", data=frame(b"") + frame(b""), headers=GRPC_WEB)
    assert two.status == 200 and two.headers["grpc-status"] == "13"  # one request message per call


async def test_server_streaming_is_relayed_chunk_by_chunk(passthrough: Client, node: NodeProcess) -> None:
    authority = authority_builder(node.authority())

    async def commit_a_block() -> None:
        grant = authority.storage_grant(os.urandom(20), 1)  # a new account each time (the node is shared)
        submitted = await passthrough.post("/v1/messages", data=grant.SerializeToString(), headers=PROTOBUF)
        assert submitted.status == 202
        while (await passthrough.get(f"/v1/messages/0x{grant.hash.hex()}")).status != 200:
            await asyncio.sleep(0.02)

    async def next_block() -> int:
        head = await resp.content.readexactly(5)
        assert head[0] == 0  # a data frame, not the trailers: the stream is still open
        payload = await resp.content.readexactly(int.from_bytes(head[1:], "big"))
        return rpc_pb2.SubscribeBlocksResponse.FromString(payload).block.header.number

    async with asyncio.timeout(20):
        await commit_a_block()
        height = int((await (await passthrough.get("/v1/node/status")).json())["block_height"])
        req = rpc_pb2.SubscribeBlocksRequest(from_block=height).SerializeToString()
        resp = await passthrough.post(f"{SERVICE}/SubscribeBlocks", data=frame(req), headers=GRPC_WEB)
        assert resp.status == 200
        assert await next_block() == height  # from the node's history
        await commit_a_block()
        assert await next_block() > height  # live: relayed as soon as the node wrote it
    resp.close()


async def test_passthrough_to_an_unreachable_node_web_url_is_503(make_gateway_client: MakeClient) -> None:
    client = await make_gateway_client(node_web_url="http://127.0.0.1:1")
    resp = await client.post(f"{SERVICE}/GetNodeStatus", data=frame(b""), headers=GRPC_WEB)
    assert resp.status == 503
    assert (await resp.json())["error"]["code"] == "UNAVAILABLE"


async def test_the_native_bridge_refuses_what_is_not_grpc_web(make_gateway_client: MakeClient) -> None:
    client = await make_gateway_client(node_web_url="")
    resp = await client.post(f"{SERVICE}/GetNodeStatus", data=frame(b""), headers={"Content-Type": "text/plain"})
    assert resp.status == 415 and (await resp.json())["error"]["code"] == "UNSUPPORTED_MEDIA_TYPE"
    bad_timeout = {**GRPC_WEB, "grpc-timeout": "soon"}
    resp = await client.post(f"{SERVICE}/GetNodeStatus", data=frame(b""), headers=bad_timeout)
    assert resp.status == 200 and resp.headers["grpc-status"] == "3"


def test_unary_call_through_the_real_gateway_process(gateway: GatewayProcess) -> None:
    resp = requests.post(gateway.url + f"{SERVICE}/GetNodeStatus", data=frame(b""), headers=GRPC_WEB, timeout=10)
    assert resp.status_code == 200
    message, trailers = unary(resp.content)
    assert "grpc-status:0" in trailers.replace(" ", "")
    assert rpc_pb2.GetNodeStatusResponse.FromString(message).status.network == "devnet"


async def test_cors(gateway_client: Client, make_gateway_client: MakeClient) -> None:
    resp = await gateway_client.get("/v1/node/status", headers={"Origin": ORIGIN})
    assert resp.headers["Access-Control-Allow-Origin"] == ORIGIN and "Origin" in resp.headers["Vary"]
    resp = await gateway_client.get("/v1/nothing", headers={"Origin": ORIGIN})  # errors too, so pages can read them
    assert resp.status == 404 and resp.headers["Access-Control-Allow-Origin"] == ORIGIN
    for headers in ({"Origin": "http://evil.test"}, {}):
        resp = await gateway_client.get("/v1/node/status", headers=headers)
        assert resp.status == 200 and "Access-Control-Allow-Origin" not in resp.headers

    async def preflight(path: str, origin: str, method: str) -> Any:
        headers = {
            "Origin": origin,
            "Access-Control-Request-Method": method,
            "Access-Control-Request-Headers": "content-type, x-grpc-web",
        }
        return await gateway_client.options(path, headers=headers)

    for path, method in (("/v1/messages", "POST"), (f"{SERVICE}/GetNodeStatus", "POST"), ("/v1/stats", "GET")):
        resp = await preflight(path, ORIGIN, method)
        assert resp.status == 204, path
        assert resp.headers["Access-Control-Allow-Origin"] == ORIGIN
        assert "POST" in resp.headers["Access-Control-Allow-Methods"]
        allowed = resp.headers["Access-Control-Allow-Headers"]
        assert "content-type" in allowed and "x-grpc-web" in allowed
    resp = await preflight("/v1/messages", "http://evil.test", "POST")
    assert resp.status == 403 and "Access-Control-Allow-Origin" not in resp.headers
    assert (await resp.json())["error"]["code"] == "PERMISSION_DENIED"
    assert (await preflight("/v1/messages", ORIGIN, "DELETE")).status == 403

    anyone = await make_gateway_client(cors_origins=("*",))
    resp = await anyone.get("/v1/stats", headers={"Origin": "http://whoever.test"})
    assert resp.headers["Access-Control-Allow-Origin"] == "*"


async def test_what_is_not_grpc_web_is_a_json_415_in_both_modes(passthrough: Client) -> None:
    for content_type in ("text/plain", "application/json", "application/grpc+proto"):
        resp = await passthrough.post(
            f"{SERVICE}/GetNodeStatus", data=frame(b""), headers={"Content-Type": content_type}
        )
        assert resp.status == 415 and resp.headers["Content-Type"].startswith("application/json"), content_type
        error = (await resp.json())["error"]
        assert error["code"] == "UNSUPPORTED_MEDIA_TYPE"
        assert "application/grpc-web+proto" in error["details"]["accepted"]


async def test_a_truncated_frame_is_answered_as_the_node_answers_it(passthrough: Client, node: NodeProcess) -> None:
    truncated = frame(b"x" * 10)[:8]  # the header announces 10 bytes, 3 follow
    direct = requests.post(
        f"{node.web_url}/chain.v1.ChainService/GetNodeStatus", data=truncated, headers=GRPC_WEB, timeout=10
    )
    resp = await passthrough.post(f"{SERVICE}/GetNodeStatus", data=truncated, headers=GRPC_WEB)
    assert direct.headers["grpc-status"] == "13" and direct.headers["grpc-message"] == "truncated grpc-web frame"
    assert resp.status == direct.status_code == 200
    assert (resp.headers["grpc-status"], resp.headers["grpc-message"]) == (
        direct.headers["grpc-status"],
        direct.headers["grpc-message"],
    )
