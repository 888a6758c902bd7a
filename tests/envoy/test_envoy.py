"""The real Envoy in front of two real chain-node processes, configured by envoy/envoy.yaml.

Browsers talk gRPC-web (HTTP/1.1) to Envoy, which speaks HTTP/2 gRPC to the nodes' native listeners; native
gRPC clients use the same port. The nodes are two independent devnets, so which node answered is visible in
the state root of their block 1.
"""

from __future__ import annotations

import asyncio
import struct
import time
from collections.abc import Iterator

import aiohttp
import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from chain.v1 import rpc_pb2, service_pb2_grpc
from node.grpcweb.wire import DATA_FLAG, TRAILERS_FLAG, Mode, encode_frame, iter_frames
from tests.fixtures.envoyproc import EnvoyProcess, render
from tests.fixtures.nodeproc import NodeProcess

ORIGIN = "http://app.test"
GRPC_WEB = "application/grpc-web+proto"
HEADER = struct.Struct(">BI")


@pytest.fixture(scope="module")
def nodes(tmp_path_factory) -> Iterator[list[NodeProcess]]:
    base = tmp_path_factory.mktemp("envoy-nodes")
    started: list[NodeProcess] = []
    try:
        for name in ("a", "b"):
            started.append(NodeProcess(base / name, "--web-addr", "", "--verify-workers", "0").start())
        yield started
    finally:
        for n in started:
            n.stop()


@pytest.fixture(scope="module")
def envoy(nodes, tmp_path_factory) -> Iterator[EnvoyProcess]:
    config = render([("127.0.0.1", n.ready["grpc_port"]) for n in nodes], cors_origins=[ORIGIN], health_interval="0.5s")
    proc = EnvoyProcess(config, tmp_path_factory.mktemp("envoy")).start(healthy_hosts=len(nodes))
    yield proc
    proc.stop()


def block_one_roots(nodes: list[NodeProcess]) -> dict[bytes, int]:
    roots: dict[bytes, int] = {}
    for n in nodes:
        c = n.client()
        deadline = time.monotonic() + 20
        while c.stub.GetNodeStatus(rpc_pb2.GetNodeStatusRequest()).status.block_height < 1:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        root = c.stub.GetBlock(rpc_pb2.GetBlockRequest(block_number=1)).block.header.state_root
        roots[root] = n.ready["grpc_port"]
        c.close()
    return roots


def parse_trailers(payload: bytes) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in payload.decode().split("\r\n"):
        if line:
            name, _, value = line.partition(":")
            out[name.strip().lower()] = value.strip()
    return out


async def unary(
    session: aiohttp.ClientSession, url: str, method: str, request: bytes
) -> tuple[list[bytes], dict[str, str]]:
    headers = {"content-type": GRPC_WEB, "x-grpc-web": "1", "origin": ORIGIN}
    body = encode_frame(DATA_FLAG, request, Mode.BINARY)
    async with session.post(f"{url}/chain.v1.ChainService/{method}", data=body, headers=headers) as resp:
        assert resp.status == 200
        assert resp.headers["content-type"].startswith("application/grpc-web")
        assert resp.headers.get("access-control-allow-origin") == ORIGIN
        raw = await resp.read()
    messages, trailers = [], {}
    for flag, payload in iter_frames(raw):
        if flag & TRAILERS_FLAG:
            trailers = parse_trailers(payload)
        else:
            messages.append(payload)
    if not trailers:  # a trailers-only response puts grpc-status in the HTTP headers
        trailers = {k.lower(): v for k, v in resp.headers.items() if k.lower().startswith(("grpc-", "reason-"))}
    return messages, trailers


def test_envoy_health_checks_both_nodes_over_grpc_health(envoy, nodes):
    health = envoy.host_health()
    assert health == {n.ready["grpc_port"]: True for n in nodes}
    stats = envoy.admin_json("/stats?format=json&filter=cluster.chain_node.health_check.success")["stats"]
    assert stats and all(s["value"] > 0 for s in stats)


async def test_unary_grpc_web_calls_reach_both_nodes(envoy, nodes):
    roots = block_one_roots(nodes)
    assert len(roots) == 2
    seen: set[int] = set()
    async with aiohttp.ClientSession() as session:
        for _ in range(40):
            request = rpc_pb2.GetBlockRequest(block_number=1).SerializeToString()
            messages, trailers = await unary(session, envoy.url, "GetBlock", request)
            assert trailers["grpc-status"] == "0", trailers
            (payload,) = messages
            block = rpc_pb2.GetBlockResponse.FromString(payload).block
            seen.add(roots[block.header.state_root])
            if len(seen) == 2:
                break
    assert seen == {n.ready["grpc_port"] for n in nodes}


async def test_grpc_web_errors_keep_status_and_reason_code(envoy):
    async with aiohttp.ClientSession() as session:
        request = rpc_pb2.GetBlockRequest(block_number=10**9).SerializeToString()
        messages, trailers = await unary(session, envoy.url, "GetBlock", request)
    assert messages == []
    assert trailers["grpc-status"] == str(grpc.StatusCode.NOT_FOUND.value[0])
    assert trailers["reason-code"] == "NOT_FOUND"


async def test_server_streaming_grpc_web_delivers_blocks_in_order(envoy):
    headers = {"content-type": GRPC_WEB, "x-grpc-web": "1", "origin": ORIGIN}
    request = rpc_pb2.SubscribeBlocksRequest(from_block=1).SerializeToString()
    body = encode_frame(DATA_FLAG, request, Mode.BINARY)
    numbers: list[int] = []
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"{envoy.url}/chain.v1.ChainService/SubscribeBlocks", data=body, headers=headers) as resp,
    ):
        assert resp.status == 200
        assert resp.headers.get("access-control-allow-origin") == ORIGIN
        async with asyncio.timeout(30):
            while len(numbers) < 3:
                flag, length = HEADER.unpack(await resp.content.readexactly(HEADER.size))
                payload = await resp.content.readexactly(length)
                assert flag == DATA_FLAG, parse_trailers(payload)
                event = rpc_pb2.SubscribeBlocksResponse.FromString(payload)
                numbers.append(event.block.header.number)
    # History from block 1 first, then live blocks (empty blocks keep coming), without gaps.
    assert numbers == list(range(1, 1 + len(numbers)))


def test_native_grpc_uses_the_same_port(envoy):
    with grpc.insecure_channel(envoy.target) as channel:
        stub = service_pb2_grpc.ChainServiceStub(channel)
        status = stub.GetNodeStatus(rpc_pb2.GetNodeStatusRequest(), timeout=10).status
        assert status.block_height >= 1
        health = health_pb2_grpc.HealthStub(channel)
        answer = health.Check(health_pb2.HealthCheckRequest(service="chain.v1.ChainService"), timeout=10)
        assert answer.status == health_pb2.HealthCheckResponse.SERVING
        blocks = stub.SubscribeBlocks(rpc_pb2.SubscribeBlocksRequest(from_block=1), timeout=30)
        first = next(iter(blocks))
        assert first.block.header.number == 1
        blocks.cancel()


async def test_cors_preflight_is_answered_by_envoy(envoy):
    preflight = {
        "origin": ORIGIN,
        "access-control-request-method": "POST",
        "access-control-request-headers": "content-type,x-grpc-web,x-user-agent,grpc-timeout",
    }
    async with aiohttp.ClientSession() as session:
        async with session.options(f"{envoy.url}/chain.v1.ChainService/GetNodeStatus", headers=preflight) as resp:
            assert resp.status == 200
            assert resp.headers["access-control-allow-origin"] == ORIGIN
            assert "POST" in resp.headers["access-control-allow-methods"]
            allowed = {h.strip() for h in resp.headers["access-control-allow-headers"].split(",")}
            assert {"content-type", "x-grpc-web", "grpc-timeout"} <= allowed
            assert int(resp.headers["access-control-max-age"]) > 0
        stranger = dict(preflight, origin="http://evil.test")
        async with session.options(f"{envoy.url}/chain.v1.ChainService/GetNodeStatus", headers=stranger) as resp:
            assert "access-control-allow-origin" not in resp.headers
        # The browser reads grpc-status and reason-code from the response: they must be exposed.
        messages, _ = await unary(session, envoy.url, "GetNodeStatus", b"")
        assert len(messages) == 1


async def test_health_listener_answers_for_probes(envoy):
    async with aiohttp.ClientSession() as session:
        async with session.get(f"http://127.0.0.1:{envoy.health_port}/healthz") as resp:
            assert resp.status == 200
        async with session.get(f"http://127.0.0.1:{envoy.health_port}/other") as resp:
            assert resp.status == 404


def test_a_draining_node_leaves_the_rotation(tmp_path):
    args = ("--web-addr", "", "--verify-workers", "0", "--drain-seconds", "5")
    extra = [NodeProcess(tmp_path / name, *args).start() for name in ("x", "y")]
    config = render([("127.0.0.1", n.ready["grpc_port"]) for n in extra], health_interval="0.2s")
    proxy = EnvoyProcess(config, tmp_path / "envoy").start(healthy_hosts=2)
    try:
        leaving = extra[0]
        leaving.signal()  # NOT_SERVING at once, listeners stay up for --drain-seconds
        deadline = time.monotonic() + 4
        while proxy.host_health()[leaving.ready["grpc_port"]]:
            assert time.monotonic() < deadline, "envoy kept a NOT_SERVING node in rotation"
            time.sleep(0.05)
        assert proxy.host_health()[extra[1].ready["grpc_port"]]
        with grpc.insecure_channel(proxy.target) as channel:
            stub = service_pb2_grpc.ChainServiceStub(channel)
            for _ in range(10):
                stub.GetNodeStatus(rpc_pb2.GetNodeStatusRequest(), timeout=10)
    finally:
        proxy.stop()
        for n in extra:
            n.stop()
