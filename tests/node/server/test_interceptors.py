"""The error interceptor over a real grpc.aio server: typed errors keep their status, anything unexpected is
INTERNAL with a reason code (never gRPC's UNKNOWN), and a handler's own abort is left as it chose."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest

from node.errors import REASON_CODE, NotFound, trailer
from node.server.rpc.interceptors import ErrorInterceptor


async def boom(request: bytes, context: Any) -> bytes:
    raise OSError("disk on fire")


async def missing(request: bytes, context: Any) -> bytes:
    raise NotFound("project", "0xab")


async def chooses(request: bytes, context: Any) -> bytes:
    await context.abort(grpc.StatusCode.PERMISSION_DENIED, "not you")
    return b""


async def streams_then_fails(request: bytes, context: Any) -> AsyncIterator[bytes]:
    yield b"one"
    raise RuntimeError("lost the thread")


@pytest.fixture
async def channel() -> AsyncIterator[grpc.aio.Channel]:
    handlers = {
        "Boom": grpc.unary_unary_rpc_method_handler(boom),
        "Missing": grpc.unary_unary_rpc_method_handler(missing),
        "Chooses": grpc.unary_unary_rpc_method_handler(chooses),
        "Stream": grpc.unary_stream_rpc_method_handler(streams_then_fails),
    }
    server = grpc.aio.server(interceptors=[ErrorInterceptor()])
    server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler("test.Svc", handlers)])
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as ch:
            yield ch
    finally:
        await server.stop(None)


def unary(channel: grpc.aio.Channel, method: str) -> Any:
    return channel.unary_unary(f"/test.Svc/{method}", request_serializer=None, response_deserializer=None)(b"")


async def failure(call: Any) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await call
    return err.value


def reason(err: grpc.aio.AioRpcError) -> str | None:
    return trailer(err.trailing_metadata(), REASON_CODE)


async def test_an_unexpected_exception_is_internal_with_a_reason_code(channel: grpc.aio.Channel) -> None:
    err = await failure(unary(channel, "Boom"))
    assert err.code() == grpc.StatusCode.INTERNAL and reason(err) == "INTERNAL"
    assert "disk on fire" not in (err.details() or "")  # internals are logged, not sent


async def test_typed_errors_and_chosen_aborts_keep_their_status(channel: grpc.aio.Channel) -> None:
    err = await failure(unary(channel, "Missing"))
    assert err.code() == grpc.StatusCode.NOT_FOUND and reason(err) == "NOT_FOUND"
    err = await failure(unary(channel, "Chooses"))
    assert err.code() == grpc.StatusCode.PERMISSION_DENIED and err.details() == "not you"


async def test_a_stream_that_fails_midway_ends_internal(channel: grpc.aio.Channel) -> None:
    call = channel.unary_stream("/test.Svc/Stream", request_serializer=None, response_deserializer=None)(b"")
    got = []
    with pytest.raises(grpc.aio.AioRpcError) as err:
        async for item in call:
            got.append(item)
    assert got == [b"one"]
    assert err.value.code() == grpc.StatusCode.INTERNAL and reason(err.value) == "INTERNAL"
