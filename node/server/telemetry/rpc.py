"""RPC metrics: `rpc.server.duration` for every call, native gRPC (a server interceptor) and gRPC-web on the
node's own listener (an aiohttp middleware reading the status the gRPC-web handler ended the call with).

Placed before the error interceptor, so it sees the final status of every call, including requests that
did not decode: the error interceptor sets the `reason-code` trailer and aborts, and this one reads the
status code and that trailer from the context. Attributes (OpenTelemetry RPC conventions plus ours):
`rpc.system` = grpc, `rpc.service`, `rpc.method`, `rpc.grpc.status_code` (the number, as the
conventions say), `chain.reason_code` ("" on success) and `chain.transport` (grpc / grpc-web). Streams are
recorded when they end; gRPC-web calls whose client left before the end are not recorded.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any, Protocol

import grpc
from aiohttp import web
from aiohttp.typedefs import Middleware

from node.errors import REASON_CODE, trailer
from node.grpcweb.responder import STATUS_KEY
from node.observability.histogram import Key, series_key
from node.server.rpc.interceptors import Handler, WrappingInterceptor
from node.server.telemetry.node_metrics import NodeMetrics

Attributes = Mapping[str, str | int]


class DurationSink(Protocol):
    """Where a call's duration goes: the endpoint's histogram (node/observability/histogram.py). (A read
    worker records its own calls through node/server/readers/served.py, not through this interceptor.)"""

    def record(self, amount: float, attributes: Attributes | None = None) -> None: ...

    def record_key(self, amount: float, key: Key) -> None:
        """`record` with the attributes given as their `series_key` (made once, kept by the caller)."""


class RpcRecorder(Protocol):
    """NodeMetrics fits it (and the interceptor test's recorder)."""

    @property
    def rpc_duration(self) -> DurationSink: ...


def attributes(service: str, method: str, code: grpc.StatusCode, reason: str) -> dict[str, str | int]:
    """The attributes of one native gRPC call's `rpc.server.duration` entry."""
    return {
        "rpc.system": "grpc",
        "rpc.service": service,
        "rpc.method": method,
        "rpc.grpc.status_code": code.value[0],
        "chain.reason_code": reason,
        "chain.transport": "grpc",
    }


def outcome(context: Any, exc: BaseException | None) -> tuple[grpc.StatusCode, str]:
    if exc is None:
        return grpc.StatusCode.OK, ""
    if isinstance(exc, asyncio.CancelledError | GeneratorExit):  # the client went away
        return grpc.StatusCode.CANCELLED, ""
    code = grpc.StatusCode.UNKNOWN
    reason = ""
    try:
        code = context.code() or grpc.StatusCode.UNKNOWN
        reason = trailer(context.trailing_metadata(), REASON_CODE) or ""
    except Exception:  # a context without them (should not happen): the call still counts
        pass
    if isinstance(code, int):
        code = next((c for c in grpc.StatusCode if c.value[0] == code), grpc.StatusCode.UNKNOWN)
    return code, reason


class RpcMetricsInterceptor(WrappingInterceptor):
    def __init__(self, metrics: RpcRecorder) -> None:
        super().__init__()
        self.metrics = metrics

    def _record(self, service: str, method: str, started: float, context: Any, exc: BaseException | None) -> None:
        code, reason = outcome(context, exc)
        duration = (time.perf_counter() - started) * 1000
        self.metrics.rpc_duration.record(duration, attributes(service, method, code, reason))

    def wrap(self, handler: Handler, path: str) -> Handler:
        service, _, method = path.lstrip("/").rpartition("/")
        record = self._record
        if handler.unary_unary is not None:
            inner = handler.unary_unary
            sink = self.metrics.rpc_duration
            ok = series_key(attributes(service, method, grpc.StatusCode.OK, ""))  # a success's series, made once

            async def unary(request: Any, context: Any) -> Any:
                started = time.perf_counter()
                try:
                    response = await inner(request, context)
                except BaseException as exc:
                    record(service, method, started, context, exc)
                    raise
                sink.record_key((time.perf_counter() - started) * 1000, ok)
                return response

            return grpc.unary_unary_rpc_method_handler(
                unary,
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        if handler.unary_stream is not None:
            inner_stream: Any = handler.unary_stream

            async def stream(request: Any, context: Any) -> AsyncIterator[Any]:
                started = time.perf_counter()
                try:
                    async for item in inner_stream(request, context):
                        yield item
                except BaseException as exc:
                    record(service, method, started, context, exc)
                    raise
                record(service, method, started, context, None)

            async def written(request: Any, context: Any) -> None:  # a handler that calls context.write
                started = time.perf_counter()
                try:
                    await inner_stream(request, context)
                except BaseException as exc:
                    record(service, method, started, context, exc)
                    raise
                record(service, method, started, context, None)

            return grpc.unary_stream_rpc_method_handler(
                written if inspect.iscoroutinefunction(inner_stream) else stream,
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        return handler


WebHandler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def grpc_web_metrics(metrics: NodeMetrics) -> Middleware:
    """A middleware for the node's gRPC-web app: the same `rpc.server.duration`, `chain.transport` grpc-web."""

    @web.middleware
    async def record(request: web.Request, handler: WebHandler) -> web.StreamResponse:
        started = time.perf_counter()
        try:
            return await handler(request)
        finally:
            status = request.get(STATUS_KEY)
            if status is not None:
                reason = trailer(status.trailing_metadata, REASON_CODE) or ""
                metrics.rpc_duration.record(
                    (time.perf_counter() - started) * 1000,
                    {
                        "rpc.system": "grpc",
                        "rpc.service": request.match_info.get("service", ""),
                        "rpc.method": request.match_info.get("method", ""),
                        "rpc.grpc.status_code": status.code.value[0],
                        "chain.reason_code": reason,
                        "chain.transport": "grpc-web",
                    },
                )

    return record
