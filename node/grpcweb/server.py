"""gRPC-web over HTTP/1.1, dispatched to the same servicer objects the native grpc.aio server runs.

No proxy and no second implementation: `grpc_web_app` calls the generated `add_XServicer_to_server`
functions with a collector standing in for the server, so it gets exactly the `grpc.RpcMethodHandler`s
native gRPC gets (deserializer, serializer, and the servicer's bound coroutine or async generator). A
request is decoded (`grpcweb_wire`), handed to that behaviour with a `GrpcWebServicerContext`, and the
outcome is framed back in the request's mode. Errors become status the way the native server's error
interceptor makes them: the node passes the same `error_mapper`. docs/grpc-web.md describes the protocol
subset, CORS rules and limits.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import socket
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import grpc
import grpc.aio
from aiohttp import web

from node.errors import DEADLINE_DETAILS, MessageRejected, Reason
from node.grpcweb.context import GrpcWebServicerContext
from node.grpcweb.cors import CorsPolicy
from node.grpcweb.responder import ClientGone, Responder, RpcStatus
from node.grpcweb.wire import (
    MetadataValue,
    Metadatum,
    Mode,
    ProtocolError,
    headers_to_metadata,
    parse_content_type,
    parse_timeout,
    request_message,
    request_messages,
)

if TYPE_CHECKING:
    MethodHandler = grpc.RpcMethodHandler[Any, Any]
    GenericHandler = grpc.GenericRpcHandler[Any, Any]
else:
    MethodHandler = grpc.RpcMethodHandler
    GenericHandler = grpc.GenericRpcHandler

log = logging.getLogger("chain.grpcweb")

DEFAULT_MAX_MESSAGE_SIZE = 4 * 1024 * 1024
SERVER_FAULTS = frozenset({grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL, grpc.StatusCode.DATA_LOSS})

# A generated `add_XServicer_to_server(servicer, server)` function.
AddServicerFn = Callable[[Any, Any], None]
# What the native error interceptor uses: exception -> (code, message, trailing metadata).
ErrorMapper = Callable[[BaseException], tuple[grpc.StatusCode, str, Iterable[tuple[str, MetadataValue]]]]


@dataclass(frozen=True)
class GrpcWebOptions:
    """Limits and tunables of the gRPC-web endpoint (the defaults suit a node)."""

    # Largest request message accepted, like native gRPC's max_receive_message_length.
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE
    # How long a browser may cache a preflight answer, seconds.
    cors_max_age: int = 600
    # Request headers browsers may send besides the standard gRPC-web ones (custom metadata).
    cors_extra_headers: tuple[str, ...] = ()
    # How often an idle server stream checks that its client is still connected, seconds. Hosts running
    # the app with aiohttp's handler cancellation (serve_grpc_web does) notice a disconnect at once anyway.
    disconnect_poll_interval: float = 1.0


# --- method handlers, collected as native gRPC collects them --------------------------------------------------


class _CallDetails(grpc.HandlerCallDetails):
    def __init__(self, method: str, invocation_metadata: tuple[Metadatum, ...]) -> None:
        self.method = method
        self.invocation_metadata = invocation_metadata


class MethodHandlers:
    """Stands in for a grpc server while the generated `add_XServicer_to_server` functions run.

    Generated code registers every method twice, as registered method handlers (looked up by full method
    name) and as a generic handler; like the native server, lookups try the first, then the second (which
    also covers code that only registers generic handlers).
    """

    def __init__(self) -> None:
        self.registered: dict[str, MethodHandler] = {}
        self.generic: list[GenericHandler] = []

    @classmethod
    def collect(cls, services: Iterable[tuple[AddServicerFn, Any]]) -> MethodHandlers:
        handlers = cls()
        for add_to_server, servicer in services:
            add_to_server(servicer, handlers)
        return handlers

    def add_registered_method_handlers(self, service_name: str, method_handlers: Mapping[str, MethodHandler]) -> None:
        for method, handler in method_handlers.items():
            self.registered[f"/{service_name}/{method}"] = handler

    def add_generic_rpc_handlers(self, generic_rpc_handlers: Iterable[GenericHandler]) -> None:
        self.generic.extend(generic_rpc_handlers)

    def lookup(self, method: str, metadata: tuple[Metadatum, ...] = ()) -> MethodHandler | None:
        handler = self.registered.get(method)
        if handler is not None:
            return handler
        details = _CallDetails(method, metadata)
        for generic in self.generic:
            found = generic.service(details)
            if found is not None:
                return found
        return None


def _client_gone(request: web.Request) -> bool:
    transport = request.transport
    return transport is None or transport.is_closing()


def _peer(request: web.Request) -> str:
    transport = request.transport
    peername = transport.get_extra_info("peername") if transport is not None else None
    if isinstance(peername, tuple) and len(peername) >= 2:
        host, port = peername[0], peername[1]
        return f"ipv6:[{host}]:{port}" if ":" in str(host) else f"ipv4:{host}:{port}"
    return "unknown"


# A method's behaviour: (request or request iterator, context) -> response, awaitable or async iterator.
Behaviour = Callable[[Any, Any], Any]


def _behaviour(handler: MethodHandler) -> Behaviour:
    """The servicer callable of a handler, whichever of the four call shapes it has."""
    if handler.request_streaming:
        found = handler.stream_stream if handler.response_streaming else handler.stream_unary
    else:
        found = handler.unary_stream if handler.response_streaming else handler.unary_unary
    return cast(Behaviour, found)


async def _iterate(messages: Sequence[Any]) -> AsyncIterator[Any]:
    """A client stream that has already ended: gRPC-web over HTTP/1.1 delivers the request body whole."""
    for message in messages:
        yield message


# --- dispatch -------------------------------------------------------------------------------------------------


class GrpcWebHandler:
    """The aiohttp handlers: POST runs a call, OPTIONS answers CORS preflights."""

    def __init__(
        self,
        methods: MethodHandlers,
        *,
        cors: CorsPolicy,
        error_mapper: ErrorMapper | None,
        options: GrpcWebOptions,
    ) -> None:
        self._methods = methods
        self._cors = cors
        self._error_mapper = error_mapper
        self._options = options
        self._streams: dict[asyncio.Task[RpcStatus], GrpcWebServicerContext] = {}
        self._shutting_down = False

    async def preflight(self, request: web.Request) -> web.Response:
        origin = request.headers.get("Origin")
        if origin is None:
            # Not a CORS preflight: an ordinary OPTIONS request asking what the resource supports.
            return web.Response(status=204, headers={"Allow": self._cors.allowed_methods})
        allowed = self._cors.preflight_origin(origin, request.headers.get("Access-Control-Request-Method", "POST"))
        if allowed is None:
            return web.Response(status=403, text="cross-origin request refused\n")
        return web.Response(status=204, headers=self._cors.preflight_headers(allowed))

    async def call(self, request: web.Request) -> web.StreamResponse:
        allowed_origin: str | None = None
        origin = request.headers.get("Origin")
        if origin is not None:
            allowed_origin = self._cors.allow_origin(origin)
            if allowed_origin is None:
                return web.Response(status=403, text="cross-origin request refused\n")
        parsed = parse_content_type(request.headers.get("Content-Type"))
        if parsed is None:
            cors_headers = self._cors.response_headers(allowed_origin) if allowed_origin else {}
            text = "unsupported content type: use application/grpc-web(+proto) or application/grpc-web-text(+proto)\n"
            return web.Response(status=415, text=text, headers=cors_headers)
        mode, content_type = parsed
        method = f"/{request.match_info['service']}/{request.match_info['method']}"
        out = Responder(request, mode, content_type, method, self._cors, allowed_origin)
        metadata = headers_to_metadata(request.headers.items())

        handler = self._methods.lookup(method, metadata)
        if handler is None:
            return out.trailers_only(RpcStatus(grpc.StatusCode.UNIMPLEMENTED, f"Method not found: {method}"))
        if self._shutting_down:
            return out.trailers_only(RpcStatus(grpc.StatusCode.UNAVAILABLE, "server is shutting down"))

        loop = asyncio.get_running_loop()
        deadline: float | None = None
        if "grpc-timeout" in request.headers:
            try:
                deadline = loop.time() + parse_timeout(request.headers["grpc-timeout"])
            except ValueError as exc:
                return out.trailers_only(RpcStatus(grpc.StatusCode.INVALID_ARGUMENT, str(exc)))
        try:
            payloads = self._payloads(handler, await self._read_body(request, mode), mode)
        except ProtocolError as exc:
            return out.trailers_only(RpcStatus(exc.code, exc.message))
        except ConnectionError:
            log.debug("%s: client disconnected while sending the request", method)
            return out.abandon()
        try:
            deserialize = handler.request_deserializer
            messages = [deserialize(p) if deserialize is not None else p for p in payloads]
        except Exception as exc:
            detail = f"request does not decode: {exc or type(exc).__name__}"
            if self._error_mapper is not None:  # the same status and reason code as native gRPC
                code, message, trailers = self._error_mapper(MessageRejected(Reason.MALFORMED_MESSAGE, detail))
                return out.trailers_only(RpcStatus(code, message, tuple((k, v) for k, v in trailers)))
            return out.trailers_only(RpcStatus(grpc.StatusCode.INVALID_ARGUMENT, detail))

        out.serializer = handler.response_serializer
        ctx = GrpcWebServicerContext(
            method=method,
            invocation_metadata=metadata,
            peer=_peer(request),
            deadline=deadline,
            sink=out,
            response_streaming=handler.response_streaming,
        )
        request_value: Any = _iterate(messages) if handler.request_streaming else messages[0]
        if handler.response_streaming:
            return await self._server_stream(request, _behaviour(handler), request_value, ctx, out)
        return await self._unary(_behaviour(handler), request_value, ctx, out)

    def _payloads(self, handler: MethodHandler, body: bytes, mode: Mode) -> list[bytes]:
        """The request's messages: exactly one, or for a client stream (served half-duplex) all it sent."""
        if handler.request_streaming:
            return request_messages(body, mode, self._options.max_message_size)
        return [request_message(body, mode, self._options.max_message_size)]

    async def _read_body(self, request: web.Request, mode: Mode) -> bytes:
        """The whole request body as it arrived, refused past the size limit without reading it all."""
        max_frame = self._options.max_message_size + 5
        # Slack for a (tolerated) client trailers frame; text mode is base64, maybe in padded chunks.
        limit = max_frame + 1024 if mode is Mode.BINARY else 2 * max_frame + 1024
        too_large = ProtocolError(
            grpc.StatusCode.RESOURCE_EXHAUSTED,
            f"request larger than max (limit {self._options.max_message_size} bytes per message)",
        )
        if request.content_length is not None and request.content_length > limit:
            raise too_large
        body = bytearray()
        async for chunk in request.content.iter_any():
            body += chunk
            if len(body) > limit:
                raise too_large
        return bytes(body)

    async def _unary(
        self, behaviour: Behaviour, message: Any, ctx: GrpcWebServicerContext, out: Responder
    ) -> web.StreamResponse:
        payload = b""

        async def run() -> None:
            nonlocal payload
            result = behaviour(message, ctx)
            if inspect.isawaitable(result):
                result = await result
            if ctx.code() == grpc.StatusCode.OK:
                payload = out.serialize(result)

        try:
            status = await self._run(run, ctx)
            if status.code != grpc.StatusCode.OK:
                return await out.finish(status)
            if not out.started:
                return out.unary(payload, status)
            await out.send_payload(payload)
            return await out.finish(status)
        except ClientGone:
            ctx.mark_cancelled()
            log.debug("%s: client disconnected", ctx.method)
            return out.abandon()
        except asyncio.CancelledError:
            ctx.mark_cancelled()  # aiohttp cancels the handler when the client disconnects
            raise
        finally:
            ctx.finish(cancelled=ctx.cancelled())

    async def _server_stream(
        self,
        request: web.Request,
        behaviour: Behaviour,
        message: Any,
        ctx: GrpcWebServicerContext,
        out: Responder,
    ) -> web.StreamResponse:

        async def run() -> None:
            result = behaviour(message, ctx)
            if hasattr(result, "__aiter__"):
                responses = cast(AsyncIterator[Any], result)
                try:
                    async for response in responses:
                        await out.send_message(response)
                finally:
                    aclose = getattr(responses, "aclose", None)
                    if aclose is not None:
                        await aclose()  # runs the generator's finally when the client is gone
            elif inspect.isawaitable(result):
                await result  # a coroutine that writes with context.write()
            elif result is not None:
                for response in result:
                    await out.send_message(response)

        task = asyncio.create_task(self._run(run, ctx), name=f"grpc-web {ctx.method}")
        self._streams[task] = ctx
        try:
            try:
                while not task.done():
                    await asyncio.wait({task}, timeout=self._options.disconnect_poll_interval)
                    if not task.done() and _client_gone(request):
                        ctx.mark_cancelled()
                        task.cancel()
            finally:
                if not task.done():  # this handler was cancelled: the client left, or the server is stopping
                    ctx.mark_cancelled()
                    task.cancel()
                    await asyncio.wait({task})
                self._streams.pop(task, None)
            if task.cancelled():
                if _client_gone(request):
                    log.debug("%s: client disconnected; stream cancelled", ctx.method)
                    return out.abandon()
                return await out.finish(RpcStatus(grpc.StatusCode.UNAVAILABLE, "server is shutting down"))
            return await out.finish(task.result())
        except ClientGone:
            ctx.mark_cancelled()
            log.debug("%s: client disconnected; stream closed", ctx.method)
            return out.abandon()
        finally:
            ctx.finish(cancelled=ctx.cancelled())

    async def _run(self, body: Callable[[], Awaitable[None]], ctx: GrpcWebServicerContext) -> RpcStatus:
        """Run the servicer part of a call under its deadline and turn the outcome into a status."""
        timeout = asyncio.timeout_at(ctx.deadline)
        try:
            async with timeout:
                await body()
        except grpc.aio.AbortError:
            return RpcStatus(ctx.code(), ctx.details(), ctx.trailing_metadata())
        except ClientGone:
            raise
        except TimeoutError as exc:
            if not timeout.expired():
                return self._map_exception(exc, ctx)
            ctx.mark_cancelled()
            return RpcStatus(grpc.StatusCode.DEADLINE_EXCEEDED, DEADLINE_DETAILS)
        except Exception as exc:
            return self._map_exception(exc, ctx)
        return RpcStatus(ctx.code(), ctx.details(), ctx.trailing_metadata())

    def _map_exception(self, exc: Exception, ctx: GrpcWebServicerContext) -> RpcStatus:
        """A servicer exception that is not an abort: the error mapper decides, as in the native interceptor."""
        if self._error_mapper is None:
            log.error("%s failed", ctx.method, exc_info=exc)
            code = ctx.code() if ctx.code() != grpc.StatusCode.OK else grpc.StatusCode.UNKNOWN
            return RpcStatus(code, str(exc) or type(exc).__name__, ctx.trailing_metadata())
        try:
            code, message, trailers = self._error_mapper(exc)
            trailing = tuple((key, value) for key, value in trailers)
        except Exception:
            log.exception("%s: error mapper failed on %r", ctx.method, exc)
            return RpcStatus(grpc.StatusCode.UNKNOWN, "internal error")
        if code in SERVER_FAULTS:
            log.error("%s failed", ctx.method, exc_info=exc)
        else:
            log.debug("%s: %s: %s", ctx.method, code.name, message)
        return RpcStatus(code, message, trailing)

    async def on_shutdown(self, app: web.Application) -> None:
        """End every open stream with UNAVAILABLE so clients reconnect elsewhere; refuse new calls."""
        self._shutting_down = True
        for task, ctx in list(self._streams.items()):
            ctx.mark_cancelled()
            task.cancel()


HANDLER_KEY = web.AppKey("grpc_web_handler", GrpcWebHandler)


def grpc_web_app(
    services: Sequence[tuple[AddServicerFn, Any]],
    *,
    cors_origins: Sequence[str],
    error_mapper: ErrorMapper | None = None,
    options: GrpcWebOptions | None = None,
) -> web.Application:
    """An aiohttp app serving gRPC-web `POST /{service}/{method}` for the given servicers.

    `services` pairs each generated `add_XServicer_to_server` function with the servicer object the native
    server also runs; `error_mapper` is the function the native error interceptor uses.
    """
    opts = options or GrpcWebOptions()
    methods = MethodHandlers.collect(services)
    cors = CorsPolicy.build(cors_origins, max_age=opts.cors_max_age, extra_request_headers=opts.cors_extra_headers)
    handler = GrpcWebHandler(methods, cors=cors, error_mapper=error_mapper, options=opts)
    app = web.Application()
    app[HANDLER_KEY] = handler
    app.router.add_post("/{service}/{method}", handler.call)
    app.router.add_route("OPTIONS", "/{service}/{method}", handler.preflight)
    app.on_shutdown.append(handler.on_shutdown)
    return app


async def serve_grpc_web(
    app: web.Application,
    host: str,
    port: int,
    *,
    shutdown_timeout: float = 5.0,
    ssl_context: ssl.SSLContext | None = None,
) -> tuple[web.AppRunner, int]:
    """Listen on host:port (0 picks a free port) and return the runner (cleanup() stops it) and the port.

    Handler cancellation is on, so a client that disconnects cancels its call at once. With port 0 and a host
    name, only the first address the name resolves to is bound, so the returned port is the only one.
    """
    runner = web.AppRunner(app, handler_cancellation=True, shutdown_timeout=shutdown_timeout)
    await runner.setup()
    try:
        bind_host: str | None = host or None
        if port == 0 and bind_host is not None:
            infos = await asyncio.get_running_loop().getaddrinfo(
                bind_host, 0, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
            )
            bind_host = str(infos[0][4][0])
        # exclusive (node/listen.py); over TLS with `ssl_context` (node/tls.py: renewed files picked up)
        site = web.TCPSite(runner, bind_host, port, reuse_port=False, ssl_context=ssl_context)
        await site.start()
    except BaseException:
        await runner.cleanup()
        raise
    return runner, int(runner.addresses[0][1])
