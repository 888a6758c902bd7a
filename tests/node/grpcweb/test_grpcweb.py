"""gRPC-web against a real socket, with the same servicer instance also served by a real grpc.aio server.

The client side here is hand-rolled on purpose (aiohttp + its own frame parser), independent of the server's
wire module; tests/node/grpcweb/test_grpcweb_js.py runs a real JavaScript client.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import re
import struct
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

import aiohttp
import grpc
import grpc.aio
import pytest
from aiohttp import web
from grpc_health.v1 import health_pb2

from chain.v1 import rpc_pb2, service_pb2_grpc
from node.grpcweb.server import grpc_web_app, serve_grpc_web
from tests.fixtures.grpcweb_stack import (
    ALLOWED_ORIGIN,
    MAX_MESSAGE,
    NOT_FOUND_DETAIL,
    STREAM_COUNT,
    Context,
    Stack,
    demo_servicer,
    running_stack,
)


@pytest.fixture
async def stack() -> AsyncIterator[Stack]:
    async with running_stack() as s:
        yield s


# --- a minimal independent gRPC-web client ------------------------------------------------------------------


def frame(payload: bytes, flag: int = 0) -> bytes:
    return struct.pack(">BI", flag, len(payload)) + payload


def b64_chunks_decode(text: bytes) -> bytes:
    return b"".join(base64.b64decode(c) for c in re.findall(rb"[A-Za-z0-9+/]+=*", text))


@dataclass
class Reply:
    http_status: int
    headers: Any
    raw: bytes = b""
    messages: list[bytes] = field(default_factory=list)
    trailers: dict[str, str] = field(default_factory=dict)

    @property
    def status(self) -> int:
        raw = self.trailers.get("grpc-status", self.headers.get("grpc-status"))
        return int(raw)

    @property
    def message(self) -> str:
        return unquote(self.trailers.get("grpc-message", self.headers.get("grpc-message", "")))


def parse_body(body: bytes, reply: Reply) -> None:
    offset = 0
    while offset < len(body):
        flag, length = struct.unpack_from(">BI", body, offset)
        payload = body[offset + 5 : offset + 5 + length]
        offset += 5 + length
        if flag & 0x80:
            for line in payload.decode("ascii").split("\r\n"):
                if line:
                    name, _, value = line.partition(":")
                    reply.trailers[name.strip()] = value.strip()
        else:
            assert not reply.trailers, "data frame after trailers"
            reply.messages.append(payload)


async def post(
    stack: Stack,
    method: str,
    request: bytes | Any,
    *,
    text: bool = False,
    headers: dict[str, str] | None = None,
    body: bytes | None = None,
) -> Reply:
    raw = request if isinstance(request, bytes) else request.SerializeToString()
    data = body if body is not None else frame(raw)
    content_type = "application/grpc-web-text" if text else "application/grpc-web+proto"
    if text and body is None:
        data = base64.b64encode(data)
    all_headers = {"Content-Type": content_type, "X-Grpc-Web": "1", **(headers or {})}
    async with stack.session.post(f"{stack.url}{method}", data=data, headers=all_headers) as resp:
        content = await resp.read()
        reply = Reply(resp.status, resp.headers, content)
    if resp.status == 200:
        if text:
            assert resp.headers["Content-Type"].startswith("application/grpc-web-text")
            content = b64_chunks_decode(content)
        parse_body(content, reply)
    return reply


STATUS = "/chain.v1.ChainService/GetNodeStatus"
SUBSCRIBE_BLOCKS = "/chain.v1.ChainService/SubscribeBlocks"
SUBSCRIBE_MESSAGES = "/chain.v1.ChainService/SubscribeMessages"


# --- unary --------------------------------------------------------------------------------------------------


async def test_native_and_web_calls_share_one_servicer_instance(stack: Stack) -> None:
    first = await stack.stub.GetNodeStatus(rpc_pb2.GetNodeStatusRequest())
    reply = await post(stack, STATUS, rpc_pb2.GetNodeStatusRequest())
    third = await stack.stub.GetNodeStatus(rpc_pb2.GetNodeStatusRequest())

    assert reply.http_status == 200 and reply.status == 0
    assert reply.headers["Content-Type"] == "application/grpc-web+proto"
    [payload] = reply.messages
    web_status = rpc_pb2.GetNodeStatusResponse.FromString(payload).status
    assert (first.status.block_height, web_status.block_height, third.status.block_height) == (1, 2, 3)
    assert stack.servicer.calls == 3
    assert web_status.network == "testnet"


async def test_unary_ok_carries_trailing_metadata_in_the_trailer_frame(stack: Stack) -> None:
    reply = await post(stack, STATUS, rpc_pb2.GetNodeStatusRequest())
    assert "grpc-status" not in reply.headers  # not trailers-only: the status is in the body
    assert reply.trailers["grpc-status"] == "0"
    assert reply.trailers["x-served-by"] == "demo"
    raw = reply.trailers["x-trace-bin"]
    assert base64.b64decode(raw + "=" * (-len(raw) % 4)) == b"\x00\xff\x10"


async def test_text_mode_request_and_response(stack: Stack) -> None:
    reply = await post(stack, STATUS, rpc_pb2.GetNodeStatusRequest(), text=True)
    assert reply.status == 0
    assert reply.headers["Content-Type"] == "application/grpc-web-text"
    assert rpc_pb2.GetNodeStatusResponse.FromString(reply.messages[0]).status.block_height == 1
    assert reply.trailers["x-served-by"] == "demo"


async def test_text_mode_accepts_concatenated_base64_chunks(stack: Stack) -> None:
    raw = frame(rpc_pb2.GetBlockRequest(block_number=77).SerializeToString())
    body = base64.b64encode(raw[:4]) + base64.b64encode(raw[4:])  # two padded chunks back to back
    assert b"=" in body[:-2]
    reply = await post(stack, "/chain.v1.ChainService/GetBlock", b"", text=True, body=body)
    assert reply.status == grpc.StatusCode.INVALID_ARGUMENT.value[0]
    assert reply.message == "block 77 is beyond the head"


async def test_abort_is_a_trailers_only_response_with_percent_encoded_message(stack: Stack) -> None:
    reply = await post(stack, "/chain.v1.ChainService/GetProject", rpc_pb2.GetProjectRequest(project_id=b"\xab"))
    assert reply.http_status == 200
    assert reply.headers["grpc-status"] == "5"
    assert reply.headers["reason-code"] == "PROJECT_NOT_FOUND"
    assert reply.messages == [] and reply.trailers == {}
    encoded = reply.headers["grpc-message"]
    assert "\n" not in encoded and "%25" in encoded and encoded.isascii()
    assert reply.message == NOT_FOUND_DETAIL

    with pytest.raises(grpc.aio.AioRpcError) as native:
        await stack.stub.GetProject(rpc_pb2.GetProjectRequest(project_id=b"\xab"))
    assert native.value.code() == grpc.StatusCode.NOT_FOUND
    assert native.value.details() == reply.message


async def test_exception_goes_through_the_error_mapper(stack: Stack) -> None:
    reply = await post(stack, "/chain.v1.ChainService/GetBlock", rpc_pb2.GetBlockRequest(block_number=9), text=True)
    assert reply.status == grpc.StatusCode.INVALID_ARGUMENT.value[0]
    assert reply.message == "block 9 is beyond the head"
    assert reply.headers["reason-code"] == "BLOCK_OUT_OF_RANGE"


async def test_without_mapper_an_exception_is_unknown_with_its_message_and_no_traceback() -> None:
    async with running_stack(error_mapper=None) as stack:
        reply = await post(stack, "/chain.v1.ChainService/GetBlock", rpc_pb2.GetBlockRequest(block_number=3))
        assert reply.status == grpc.StatusCode.UNKNOWN.value[0]
        assert reply.message == "block 3 is beyond the head"
        assert "Traceback" not in reply.message and "reason-code" not in reply.headers


async def test_unimplemented_servicer_method_follows_native_behaviour(stack: Stack) -> None:
    """ChainServiceServicer's default sets UNIMPLEMENTED, then raises; the mapper sees the exception."""
    reply = await post(stack, "/chain.v1.ChainService/GetChainStats", rpc_pb2.GetChainStatsRequest())
    assert reply.status == grpc.StatusCode.INTERNAL.value[0]  # demo_error_mapper's answer for the unexpected
    async with running_stack(error_mapper=None) as plain:
        reply = await post(plain, "/chain.v1.ChainService/GetChainStats", rpc_pb2.GetChainStatsRequest())
        assert reply.status == grpc.StatusCode.UNIMPLEMENTED.value[0]


async def test_unknown_method_and_service_are_unimplemented_trailers_only(stack: Stack) -> None:
    for path in ("/chain.v1.ChainService/NoSuchMethod", "/chain.v9.Nope/GetNodeStatus"):
        reply = await post(stack, path, b"")
        assert reply.http_status == 200
        assert reply.headers["grpc-status"] == "12"
        assert reply.message == f"Method not found: {path}"
        assert reply.messages == [] and reply.trailers == {}


async def test_second_service_on_the_same_endpoint(stack: Stack) -> None:
    request = health_pb2.HealthCheckRequest(service="chain.v1.ChainService")
    reply = await post(stack, "/grpc.health.v1.Health/Check", request)
    assert reply.status == 0
    assert health_pb2.HealthCheckResponse.FromString(reply.messages[0]).status == health_pb2.HealthCheckResponse.SERVING


async def test_oversize_request_is_resource_exhausted(stack: Stack) -> None:
    big = rpc_pb2.GetMessageRequest(hash=b"x" * (MAX_MESSAGE + 1))
    for text in (False, True):
        reply = await post(stack, "/chain.v1.ChainService/GetMessage", big, text=text)
        assert reply.status == grpc.StatusCode.RESOURCE_EXHAUSTED.value[0], reply.message
    # A frame that claims more than the limit, in a body that is itself small, is refused too.
    reply = await post(stack, "/chain.v1.ChainService/GetMessage", b"", body=struct.pack(">BI", 0, MAX_MESSAGE + 1))
    assert reply.status == grpc.StatusCode.RESOURCE_EXHAUSTED.value[0]
    assert stack.servicer.seen == {}
    ok = await post(stack, "/chain.v1.ChainService/GetMessage", rpc_pb2.GetMessageRequest(hash=b"x" * 1000))
    assert ok.status == 0


async def test_malformed_requests(stack: Stack) -> None:
    truncated = await post(stack, STATUS, b"", body=b"\x00\x00\x00")
    assert truncated.status == grpc.StatusCode.INTERNAL.value[0]
    undecodable = await post(stack, "/chain.v1.ChainService/GetBlock", b"\xff\xff\xff")
    assert undecodable.status == grpc.StatusCode.INVALID_ARGUMENT.value[0]
    assert "request does not decode" in undecodable.message
    assert undecodable.headers.get("reason-code") == "MALFORMED_MESSAGE"  # trailers-only: in the headers
    compressed = await post(stack, STATUS, b"", body=frame(b"", flag=1))
    assert compressed.status == grpc.StatusCode.UNIMPLEMENTED.value[0]
    async with stack.session.post(f"{stack.url}{STATUS}", data=frame(b""), headers={"Content-Type": "text/plain"}) as r:
        assert r.status == 415


async def test_context_metadata_peer_deadline_and_done_callback(stack: Stack) -> None:
    headers = {
        "x-request-id": "r-1",
        "Trace-Bin": base64.b64encode(b"\x01\x02").decode().rstrip("="),
        "grpc-timeout": "5S",
        "authorization": "Bearer t",
    }
    reply = await post(stack, "/chain.v1.ChainService/GetMessage", rpc_pb2.GetMessageRequest(), headers=headers)
    assert reply.status == 0
    metadata = dict(stack.servicer.seen["metadata"])
    assert metadata["x-request-id"] == "r-1"
    assert metadata["trace-bin"] == b"\x01\x02"
    assert metadata["authorization"] == "Bearer t"
    for transport_header in ("host", "content-type", "content-length", "grpc-timeout", "x-grpc-web", "connection"):
        assert transport_header not in metadata
    assert stack.servicer.seen["peer"].startswith("ipv4:127.0.0.1:")
    assert 4.0 < stack.servicer.seen["time_remaining"] <= 5.0
    assert stack.servicer.done_callbacks == [False]

    await post(stack, "/chain.v1.ChainService/GetMessage", rpc_pb2.GetMessageRequest())
    assert stack.servicer.seen["time_remaining"] is None


async def test_deadline_exceeded_cancels_the_servicer(stack: Stack) -> None:
    reply = await post(
        stack, "/chain.v1.ChainService/GetHealth", rpc_pb2.GetHealthRequest(), headers={"grpc-timeout": "100m"}
    )
    assert reply.status == grpc.StatusCode.DEADLINE_EXCEEDED.value[0]
    assert stack.servicer.slow_cancelled.is_set()


async def test_client_disconnect_cancels_a_unary_call(stack: Stack, caplog: pytest.LogCaptureFixture) -> None:
    body = frame(rpc_pb2.GetHealthRequest().SerializeToString())
    headers = {"Content-Type": "application/grpc-web+proto"}
    with pytest.raises(TimeoutError):
        async with stack.session.post(
            f"{stack.url}/chain.v1.ChainService/GetHealth",
            data=body,
            headers=headers,
            timeout=aiohttp.ClientTimeout(total=0.3),
        ) as resp:
            await resp.read()
    await asyncio.wait_for(stack.servicer.slow_cancelled.wait(), 5)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


# --- server streaming ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", [False, True])
async def test_stream_delivers_every_message_in_order(stack: Stack, text: bool) -> None:
    reply = await post(stack, SUBSCRIBE_BLOCKS, rpc_pb2.SubscribeBlocksRequest(from_block=10), text=text)
    assert reply.http_status == 200 and "grpc-status" not in reply.headers
    assert reply.headers.get("Transfer-Encoding") == "chunked"
    if text:  # each frame is base64-encoded on its own, so a client can decode frame by frame
        trailer = "".join(f"{k}: {v}\r\n" for k, v in reply.trailers.items()).encode()
        frames = [frame(m) for m in reply.messages] + [frame(trailer, flag=0x80)]
        assert reply.raw == b"".join(base64.b64encode(f) for f in frames)
    events = [rpc_pb2.SubscribeBlocksResponse.FromString(m) for m in reply.messages]
    assert [(e.event_id, e.block.header.number) for e in events] == [(100 + i, 10 + i) for i in range(STREAM_COUNT)]
    assert reply.trailers["grpc-status"] == "0"


async def test_stream_error_midway_arrives_in_the_trailer_after_the_messages(stack: Stack) -> None:
    request = rpc_pb2.SubscribeBlocksRequest(from_block=1, include_chunks=True)
    reply = await post(stack, SUBSCRIBE_BLOCKS, request)
    assert len(reply.messages) == 2
    assert reply.trailers["grpc-status"] == str(grpc.StatusCode.INVALID_ARGUMENT.value[0])
    assert reply.trailers["reason-code"] == "STREAM_BROKEN"
    assert unquote(reply.trailers["grpc-message"]) == "block stream broke"


async def read_frame(content: aiohttp.StreamReader) -> tuple[int, bytes]:
    flag, length = struct.unpack(">BI", await content.readexactly(5))
    return flag, await content.readexactly(length)


async def test_stream_messages_reach_the_client_as_they_are_produced(stack: Stack) -> None:
    headers = {"Content-Type": "application/grpc-web+proto"}
    body = frame(rpc_pb2.SubscribeMessagesRequest().SerializeToString())
    async with stack.session.post(f"{stack.url}{SUBSCRIBE_MESSAGES}", data=body, headers=headers) as resp:
        flag, first = await asyncio.wait_for(read_frame(resp.content), 5)
        assert flag == 0 and rpc_pb2.SubscribeMessagesResponse.FromString(first).event_id == 1
        assert not stack.servicer.stream_finally.is_set()  # the generator is still waiting for release
        stack.servicer.release.set()
        _, second = await asyncio.wait_for(read_frame(resp.content), 5)
        assert rpc_pb2.SubscribeMessagesResponse.FromString(second).event_id == 2
        flag, trailer = await asyncio.wait_for(read_frame(resp.content), 5)
        assert flag == 0x80 and b"grpc-status: 0\r\n" in trailer
    assert stack.servicer.stream_finally.is_set()


async def open_stream_then_disconnect(stack: Stack) -> None:
    headers = {"Content-Type": "application/grpc-web+proto"}
    body = frame(rpc_pb2.SubscribeMessagesRequest().SerializeToString())
    async with (
        aiohttp.ClientSession() as own,  # its own connection, so dropping the socket affects nothing else
        own.post(f"{stack.url}{SUBSCRIBE_MESSAGES}", data=body, headers=headers) as resp,
    ):
        await asyncio.wait_for(read_frame(resp.content), 5)
        assert resp.connection is not None and resp.connection.transport is not None
        resp.connection.transport.abort()


async def test_client_disconnect_mid_stream_cancels_the_generator(
    stack: Stack, caplog: pytest.LogCaptureFixture
) -> None:
    await open_stream_then_disconnect(stack)
    await asyncio.wait_for(stack.servicer.stream_finally.wait(), 5)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]  # a disconnect is not an error
    # The server keeps serving afterwards.
    assert (await post(stack, STATUS, rpc_pb2.GetNodeStatusRequest())).status == 0


async def test_disconnect_is_noticed_without_handler_cancellation(stack: Stack) -> None:
    """A host may run the app in its own runner; the stream's watchdog notices the closed socket itself."""
    runner = web.AppRunner(stack.runner.app, handler_cancellation=False)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        own = Stack(stack.servicer, stack.stub, f"http://127.0.0.1:{runner.addresses[0][1]}", stack.session, runner)
        await open_stream_then_disconnect(own)
        await asyncio.wait_for(stack.servicer.stream_finally.wait(), 5)
    finally:
        await runner.cleanup()


async def test_shutdown_ends_open_streams_with_unavailable() -> None:
    async with running_stack() as stack:
        headers = {"Content-Type": "application/grpc-web+proto"}
        body = frame(rpc_pb2.SubscribeMessagesRequest().SerializeToString())
        async with stack.session.post(f"{stack.url}{SUBSCRIBE_MESSAGES}", data=body, headers=headers) as resp:
            await asyncio.wait_for(read_frame(resp.content), 5)
            cleanup = asyncio.create_task(stack.runner.cleanup())
            flag, trailer = await asyncio.wait_for(read_frame(resp.content), 5)
            assert flag == 0x80 and b"grpc-status: 14\r\n" in trailer
            await asyncio.wait_for(cleanup, 5)
        assert stack.servicer.stream_finally.is_set()


async def test_stream_from_the_native_server_matches(stack: Stack) -> None:
    native = [r async for r in stack.stub.SubscribeBlocks(rpc_pb2.SubscribeBlocksRequest(from_block=10))]
    reply = await post(stack, SUBSCRIBE_BLOCKS, rpc_pb2.SubscribeBlocksRequest(from_block=10))
    assert [r.SerializeToString() for r in native] == reply.messages


# --- CORS -----------------------------------------------------------------------------------------------------


async def preflight(stack: Stack, origin: str, **extra: str) -> aiohttp.ClientResponse:
    headers = {
        "Origin": origin,
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "content-type,x-grpc-web,x-user-agent,grpc-timeout",
        **extra,
    }
    async with stack.session.options(f"{stack.url}{STATUS}", headers=headers) as resp:
        await resp.read()
        return resp


async def test_cors_preflight_from_an_allowed_origin(stack: Stack) -> None:
    resp = await preflight(stack, ALLOWED_ORIGIN)
    assert resp.status == 204
    assert resp.headers["Access-Control-Allow-Origin"] == ALLOWED_ORIGIN
    assert resp.headers["Access-Control-Allow-Methods"] == "POST, OPTIONS"
    allowed = {h.strip() for h in resp.headers["Access-Control-Allow-Headers"].split(",")}
    assert {"content-type", "x-grpc-web", "x-user-agent", "grpc-timeout", "authorization"} <= allowed
    assert int(resp.headers["Access-Control-Max-Age"]) > 0
    assert resp.headers["Vary"] == "Origin"


async def test_cors_preflight_refused(stack: Stack) -> None:
    for resp in (
        await preflight(stack, "https://evil.example"),
        await preflight(stack, ALLOWED_ORIGIN, **{"Access-Control-Request-Method": "DELETE"}),
    ):
        assert resp.status == 403
        assert not [h for h in resp.headers if h.lower().startswith("access-control-")]


async def test_cors_on_actual_requests(stack: Stack) -> None:
    ok = await post(stack, STATUS, rpc_pb2.GetNodeStatusRequest(), headers={"Origin": ALLOWED_ORIGIN})
    assert ok.status == 0
    assert ok.headers["Access-Control-Allow-Origin"] == ALLOWED_ORIGIN
    exposed = {h.strip() for h in ok.headers["Access-Control-Expose-Headers"].split(",")}
    assert {"grpc-status", "grpc-message", "grpc-status-details-bin"} <= exposed

    err = await post(
        stack, "/chain.v1.ChainService/GetProject", rpc_pb2.GetProjectRequest(), headers={"Origin": ALLOWED_ORIGIN}
    )
    assert "reason-code" in err.headers["Access-Control-Expose-Headers"]  # browsers may read trailers-only metadata

    refused = await post(stack, STATUS, rpc_pb2.GetNodeStatusRequest(), headers={"Origin": "https://evil.example"})
    assert refused.http_status == 403
    assert "Access-Control-Allow-Origin" not in refused.headers
    assert stack.servicer.calls == 1  # the refused call never reached the servicer

    no_origin = await post(stack, STATUS, rpc_pb2.GetNodeStatusRequest())
    assert no_origin.status == 0 and "Access-Control-Allow-Origin" not in no_origin.headers


async def test_wildcard_origin_only_when_configured() -> None:
    async with running_stack() as stack:
        assert (await preflight(stack, "https://other.example")).status == 403
    servicer = demo_servicer()
    app = grpc_web_app([(service_pb2_grpc.add_ChainServiceServicer_to_server, servicer)], cors_origins=["*"])
    runner, port = await serve_grpc_web(app, "127.0.0.1", 0)
    try:
        async with aiohttp.ClientSession() as session:
            headers = {"Origin": "https://other.example", "Access-Control-Request-Method": "POST"}
            async with session.options(f"http://127.0.0.1:{port}{STATUS}", headers=headers) as resp:
                assert resp.status == 204
                assert resp.headers["Access-Control-Allow-Origin"] == "*"
    finally:
        await runner.cleanup()


async def test_serve_grpc_web_resolves_a_host_name_to_one_port() -> None:
    app = grpc_web_app([(service_pb2_grpc.add_ChainServiceServicer_to_server, demo_servicer())], cors_origins=[])
    runner, port = await serve_grpc_web(app, "localhost", 0)
    try:
        assert port > 0 and {addr[1] for addr in runner.addresses} == {port}
    finally:
        await runner.cleanup()


class RawEcho:
    """A service registered only as a generic handler, without serializers, streaming via context.write()."""

    async def write(self, request: bytes, context: Context) -> None:
        await context.send_initial_metadata((("x-initial", "yes"),))
        for i in range(3):
            await context.write(request + bytes([i]))
        context.set_trailing_metadata((("x-count", "3"),))


def add_raw_echo(servicer: RawEcho, server: Any) -> None:
    handlers = {"Write": grpc.unary_stream_rpc_method_handler(servicer.write)}
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("demo.RawEcho", handlers),))


async def test_generic_handler_and_write_style_stream_with_initial_metadata() -> None:
    app = grpc_web_app([(add_raw_echo, RawEcho())], cors_origins=[ALLOWED_ORIGIN])
    runner, port = await serve_grpc_web(app, "127.0.0.1", 0)
    try:
        async with aiohttp.ClientSession() as session:
            stack = Stack(demo_servicer(), None, f"http://127.0.0.1:{port}", session, runner)
            reply = await post(stack, "/demo.RawEcho/Write", b"ab", headers={"Origin": ALLOWED_ORIGIN})
    finally:
        await runner.cleanup()
    assert reply.headers["x-initial"] == "yes"
    assert "x-initial" in reply.headers["Access-Control-Expose-Headers"]
    assert reply.messages == [b"ab\x00", b"ab\x01", b"ab\x02"]
    assert reply.trailers["grpc-status"] == "0" and reply.trailers["x-count"] == "3"
