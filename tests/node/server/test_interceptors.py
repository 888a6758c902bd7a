"""The error interceptor over a real grpc.aio server: typed errors keep their status, anything unexpected is
INTERNAL with a reason code (never gRPC's UNKNOWN), and a handler's own abort is left as it chose. The error
and metrics interceptors wrap each handler once, not on every call."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, NamedTuple

import grpc
import pytest

from node.errors import REASON_CODE, NotFound, trailer
from node.server.rpc.interceptors import ErrorInterceptor
from node.server.telemetry.rpc import RpcMetricsInterceptor


async def boom(request: bytes, context: Any) -> bytes:
    raise OSError("disk on fire")


async def missing(request: bytes, context: Any) -> bytes:
    raise NotFound("project", "0xab")


async def fine(request: bytes, context: Any) -> bytes:
    return b"ok"


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


class Details(NamedTuple):
    """What grpc.aio hands an interceptor (grpc.HandlerCallDetails is only a protocol)."""

    method: str
    invocation_metadata: tuple[Any, ...]


class Durations:
    """An RpcRecorder keeping each call's attributes."""

    def __init__(self) -> None:
        self.calls: list[Any] = []
        self.rpc_duration = self

    def record(self, amount: float, attributes: Any = None) -> None:
        self.calls.append(dict(attributes or {}))

    def record_key(self, amount: float, key: Any) -> None:
        self.calls.append(dict(key))


async def test_each_handler_is_wrapped_once_and_a_new_one_anew() -> None:
    """grpc.aio runs the interceptors on every call; each wraps a given handler once, and a handler other
    than the one it kept for the path is wrapped and kept in its place. Over a real server the kept
    wrappers still map each call's own error and record each call's own status."""
    recorder = Durations()
    metrics, errors = RpcMetricsInterceptor(recorder), ErrorInterceptor()
    first = grpc.unary_unary_rpc_method_handler(missing)
    given = [first]

    async def inner(details: grpc.HandlerCallDetails) -> Any:
        return given[0]

    async def chain(details: grpc.HandlerCallDetails) -> Any:
        return await errors.intercept_service(inner, details)

    details: Any = Details("/test.Svc/Missing", ())
    made = [await metrics.intercept_service(chain, details) for _ in range(3)]
    assert made[0] is made[1] is made[2] and made[0] is not first
    given[0] = grpc.unary_unary_rpc_method_handler(boom)
    again = await metrics.intercept_service(chain, details)
    assert again is not made[0] and again is await metrics.intercept_service(chain, details)

    server = grpc.aio.server(interceptors=[metrics, errors])
    handlers = {
        "Missing": grpc.unary_unary_rpc_method_handler(missing),
        "Boom": grpc.unary_unary_rpc_method_handler(boom),
        "Fine": grpc.unary_unary_rpc_method_handler(fine),
    }
    server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler("test.Svc", handlers)])
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    recorder.calls.clear()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as ch:
            for method, code, why in [("Missing", "NOT_FOUND", "NOT_FOUND"), ("Boom", "INTERNAL", "INTERNAL")] * 2:
                err = await failure(unary(ch, method))
                assert (err.code().name, reason(err)) == (code, why)
            assert await unary(ch, "Fine") == b"ok"
    finally:
        await server.stop(None)
    assert [(c["rpc.method"], c["rpc.grpc.status_code"]) for c in recorder.calls] == [
        ("Missing", 5),
        ("Boom", 13),
        ("Missing", 5),
        ("Boom", 13),
        ("Fine", 0),
    ]
    # a success is recorded under a series made once per method: the same attributes a failure's has
    assert recorder.calls[-1] == {**recorder.calls[0], "rpc.method": "Fine", "rpc.grpc.status_code": 0,
                                  "chain.reason_code": ""}  # fmt: skip
