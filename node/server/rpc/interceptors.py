"""Server interceptors: error mapping (the one place errors become status) and admin auth."""

from __future__ import annotations

import hmac
import inspect
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

import grpc

from node.errors import MessageRejected, Reason
from node.server.rpc.status import Trailers, to_status

log = logging.getLogger("chain.rpc")

if TYPE_CHECKING:
    Handler = grpc.RpcMethodHandler[Any, Any]
    Interceptor = grpc.aio.ServerInterceptor[Any, Any]
else:
    Handler = grpc.RpcMethodHandler
    Interceptor = grpc.aio.ServerInterceptor

Continuation = Callable[[grpc.HandlerCallDetails], Awaitable[Handler | None]]


def mapped(exc: BaseException, method: str) -> tuple[grpc.StatusCode, str, Trailers]:
    """The status of a call that raised `exc` (status.py's mapping); an unexpected error is logged."""
    code, message, trailers = to_status(exc)
    if code == grpc.StatusCode.INTERNAL:
        log.error("%s failed", method, exc_info=exc)
    return code, message, trailers


async def _abort(context: Any, exc: BaseException, method: str) -> None:
    code, message, trailers = mapped(exc, method)
    context.set_trailing_metadata(trailers)
    await context.abort(code, message)


class Malformed:
    """Stands in for a request body that did not decode."""

    def __init__(self, error: str) -> None:
        self.error = error


def tolerant(deserialize: Callable[[bytes], Any] | None) -> Callable[[bytes], Any] | None:
    if deserialize is None:
        return None

    def decode(raw: bytes) -> Any:
        try:
            return deserialize(raw)
        except Exception as exc:  # any decode failure is the client's malformed input
            return Malformed(str(exc) or type(exc).__name__)

    return decode


def check_decoded(request: Any) -> None:
    """MALFORMED_MESSAGE for a request body that did not decode (see `tolerant`)."""
    if isinstance(request, Malformed):
        raise MessageRejected(Reason.MALFORMED_MESSAGE, f"request does not decode: {request.error}")


def _wrap(handler: Handler, method: str) -> Handler:
    deserializer = tolerant(handler.request_deserializer)
    if handler.unary_unary is not None:
        inner = handler.unary_unary

        async def unary(request: Any, context: Any) -> Any:
            try:
                check_decoded(request)
                return await inner(request, context)
            except grpc.aio.AbortError:
                raise  # the handler chose its status itself
            except Exception as exc:  # typed errors to their status; anything else INTERNAL, logged
                await _abort(context, exc, method)

        return grpc.unary_unary_rpc_method_handler(
            unary, request_deserializer=deserializer, response_serializer=handler.response_serializer
        )
    if handler.unary_stream is not None:
        inner_stream: Any = handler.unary_stream

        async def stream(request: Any, context: Any) -> AsyncIterator[Any]:
            try:
                check_decoded(request)
                async for item in inner_stream(request, context):
                    yield item
            except grpc.aio.AbortError:
                raise
            except Exception as exc:
                await _abort(context, exc, method)

        async def written(request: Any, context: Any) -> None:
            """A stream the handler writes with `context.write` (grpc.health's Watch) instead of yielding."""
            try:
                check_decoded(request)
                await inner_stream(request, context)
            except grpc.aio.AbortError:
                raise
            except Exception as exc:
                await _abort(context, exc, method)

        return grpc.unary_stream_rpc_method_handler(
            written if inspect.iscoroutinefunction(inner_stream) else stream,
            request_deserializer=deserializer,
            response_serializer=handler.response_serializer,
        )
    return handler


class WrappingInterceptor(Interceptor):
    """An interceptor that wraps each method's handler (`wrap`) once: grpc.aio runs the interceptors on every
    call, but the servicers hand back the same handler object each time and a wrapper holds nothing of a
    call's own. A handler other than the one kept for its path (an outer interceptor's refusal) is wrapped
    and kept in its place. Only paths a handler answered are kept: the services' own."""

    def __init__(self) -> None:
        self._made: dict[str, tuple[Handler, Handler]] = {}  # method path -> (handler given, its wrapper)

    def wrap(self, handler: Handler, method: str) -> Handler:
        raise NotImplementedError

    async def intercept_service(  # type: ignore[override]
        self, continuation: Continuation, handler_call_details: grpc.HandlerCallDetails
    ) -> Handler | None:
        handler = await continuation(handler_call_details)
        if handler is None:
            return None
        method = handler_call_details.method
        made = self._made.get(method)
        if made is not None and made[0] is handler:
            return made[1]
        wrapped = self.wrap(handler, method)
        self._made[method] = (handler, wrapped)
        return wrapped


class ErrorInterceptor(WrappingInterceptor):
    """Maps typed errors to gRPC status with the reason code in trailing metadata."""

    def wrap(self, handler: Handler, method: str) -> Handler:
        return _wrap(handler, method)


class TokenInterceptor(Interceptor):
    """Requires `authorization: Bearer <token>` when a token is configured."""

    def __init__(self, token: str) -> None:
        self._expected = f"Bearer {token}".encode()

    async def intercept_service(  # type: ignore[override]
        self, continuation: Continuation, handler_call_details: grpc.HandlerCallDetails
    ) -> Handler | None:
        metadata = dict(handler_call_details.invocation_metadata or ())
        given = str(metadata.get("authorization", "")).encode()
        if hmac.compare_digest(given, self._expected):
            return await continuation(handler_call_details)

        async def deny(request: Any, context: Any) -> None:
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, "admin token required")

        return grpc.unary_unary_rpc_method_handler(deny)
