"""Relaying a call from a read worker to the node's main process, bytes in and bytes out.

    relay = Relay("unix-abstract:chain-node-123-ab12")   # the main process's private listener
    handler = relay.handler("/chain.v1.ChainService/SubmitMessage")   # None: a method nobody serves

The main process serves the relayed call with its own servicers and interceptors, so writes, streams,
health, reflection and state sync answer from a worker's connection exactly as from the main's: the
status, its message, the `reason-code` trailer and every other trailer come back unchanged, the caller's
metadata (authorization, trace context) and deadline go on. Requests and responses are not decoded here.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NoReturn

import grpc
from grpc_health.v1 import health_pb2

from chain.v1 import keychain_service_pb2, service_pb2

if TYPE_CHECKING:
    Handler = grpc.RpcMethodHandler[Any, Any]
else:
    Handler = grpc.RpcMethodHandler

REFLECTION = ("grpc.reflection.v1.ServerReflection", "grpc.reflection.v1alpha.ServerReflection")
SERVICES = (
    service_pb2.DESCRIPTOR.services_by_name["ChainService"],
    keychain_service_pb2.DESCRIPTOR.services_by_name["KeychainService"],
    health_pb2.DESCRIPTOR.services_by_name["Health"],
)
# headers gRPC sets itself on the relayed call; everything else the caller sent goes on
OWN_HEADERS = frozenset({"user-agent", "te", "content-type", "grpc-accept-encoding", "grpc-encoding", "grpc-timeout"})


def _shapes() -> Mapping[str, tuple[bool, bool]]:
    """(client streams, server streams) of every method the node's public server has (the internal listener's
    services, state sync and read batches, are the main process's own: never on the workers' port)."""
    out = {f"/{s.full_name}/{m.name}": (m.client_streaming, m.server_streaming) for s in SERVICES for m in s.methods}
    out.update({f"/{name}/ServerReflectionInfo": (True, True) for name in REFLECTION})
    return MappingProxyType(out)


def _metadata(context: Any) -> tuple[tuple[str, str | bytes], ...]:
    return tuple(
        (key, value)
        for key, value in context.invocation_metadata() or ()
        if not key.startswith(":") and key not in OWN_HEADERS
    )


async def _fail(context: Any, err: grpc.aio.AioRpcError) -> NoReturn:
    await context.abort(err.code(), err.details() or "", tuple(err.trailing_metadata() or ()))
    raise AssertionError("abort returns only by raising")  # for type checkers


async def _pass_initial(call: Any, context: Any) -> None:
    initial = await call.initial_metadata()
    if initial:
        await context.send_initial_metadata(tuple(initial))


class Relay:
    def __init__(self, target: str, max_message_bytes: int) -> None:
        options = [
            ("grpc.max_send_message_length", max_message_bytes),
            ("grpc.max_receive_message_length", -1),
        ]
        self._channel = grpc.aio.insecure_channel(target, options=options)
        self._shapes = _shapes()

    async def close(self) -> None:
        await self._channel.close(None)

    async def wait_ready(self, timeout: float) -> None:
        await asyncio.wait_for(self._channel.channel_ready(), timeout)

    def paths(self) -> tuple[str, ...]:
        """Every method path of the node's public server."""
        return tuple(self._shapes)

    def handler(self, path: str) -> Handler | None:
        shape = self._shapes.get(path)
        if shape is None:
            return None
        if shape == (False, False):
            return grpc.unary_unary_rpc_method_handler(self._unary(path))
        if shape == (False, True):
            return grpc.unary_stream_rpc_method_handler(self._server_stream(path))
        return grpc.stream_stream_rpc_method_handler(self._bidi(path))

    def _unary(self, path: str) -> Any:
        call_main = self._channel.unary_unary(path, None, None)

        async def unary(request: bytes, context: Any) -> bytes:
            call = call_main(request, metadata=_metadata(context), timeout=context.time_remaining())
            try:
                response: bytes = await call
            except grpc.aio.AioRpcError as err:
                await _fail(context, err)
            await _pass_initial(call, context)
            context.set_trailing_metadata(tuple(await call.trailing_metadata() or ()))
            return response

        return unary

    def _server_stream(self, path: str) -> Any:
        call_main = self._channel.unary_stream(path, None, None)

        async def stream(request: bytes, context: Any) -> AsyncIterator[bytes]:
            call = call_main(request, metadata=_metadata(context), timeout=context.time_remaining())
            try:
                async for item in call:
                    yield item
            except grpc.aio.AioRpcError as err:
                await _fail(context, err)
            finally:
                call.cancel()  # the caller left (or the stream ended): nothing more from the main process
            context.set_trailing_metadata(tuple(await call.trailing_metadata() or ()))

        return stream

    def _bidi(self, path: str) -> Any:
        call_main = self._channel.stream_stream(path, None, None)

        async def bidi(requests: AsyncIterator[bytes], context: Any) -> AsyncIterator[bytes]:
            call = call_main(requests, metadata=_metadata(context), timeout=context.time_remaining())
            try:
                async for item in call:
                    yield item
            except grpc.aio.AioRpcError as err:
                await _fail(context, err)
            finally:
                call.cancel()

        return bidi
