"""A read worker's own calls, wrapped once at start-up: the error mapping and the RPC metrics in one coroutine.

The main process runs two generic interceptors per call (node/server/rpc/interceptors.py, then
node/server/telemetry/rpc.py). A worker answers its local reads with one wrapper per method, built when the
worker starts, that does per call what those two do together: a request that does not decode is
MALFORMED_MESSAGE, a typed error becomes its status and trailers (interceptors.mapped, status.py's one
mapping), an unexpected one INTERNAL (logged), a status the handler chose itself (the relayed fallback
of GetMessage) goes out unchanged, and every call's duration goes to the worker's shipper under the
attributes the main process records. One coroutine frame per call instead of three, and a successful
call's duration is appended to its method's list in the shipper (shipping.py), bucketed once a second.

    handler = served(path, local_handler, shipper)    # shipper None: metrics off
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import grpc

from node.errors import REASON_CODE, trailer
from node.server.readers.shipping import RpcShipper
from node.server.rpc.interceptors import Malformed, check_decoded, mapped, tolerant
from node.server.telemetry.rpc import attributes, outcome

if TYPE_CHECKING:
    Handler = grpc.RpcMethodHandler[Any, Any]
else:
    Handler = grpc.RpcMethodHandler


def served(path: str, handler: Handler, shipper: RpcShipper | None) -> Handler:
    """`handler` (a unary-unary local read) with the main process's per-call error mapping and metrics."""
    inner = handler.unary_unary
    if inner is None:
        raise ValueError(f"{path}: a worker answers only unary reads itself")
    service, _, method = path.lstrip("/").rpartition("/")
    ok = None if shipper is None else shipper.durations(attributes(service, method, grpc.StatusCode.OK, ""))
    clock = time.perf_counter

    def record(started: float, code: grpc.StatusCode, reason: str) -> None:
        if shipper is not None:
            shipper.record((clock() - started) * 1000, attributes(service, method, code, reason))

    async def unary(request: Any, context: Any) -> Any:
        started = clock()
        try:
            if type(request) is Malformed:
                check_decoded(request)
            response = await inner(request, context)
        except grpc.aio.AbortError as exc:  # the handler chose its status itself
            record(started, *outcome(context, exc))
            raise
        except Exception as exc:  # typed errors to their status; anything else INTERNAL, logged
            code, message, trailers = mapped(exc, path)
            record(started, code, trailer(trailers, REASON_CODE) or "")
            context.set_trailing_metadata(trailers)
            await context.abort(code, message)
        except BaseException as exc:  # the client went away
            record(started, *outcome(context, exc))
            raise
        if ok is not None:
            ok.append((clock() - started) * 1000)
        return response

    return grpc.unary_unary_rpc_method_handler(
        unary,
        request_deserializer=tolerant(handler.request_deserializer),
        response_serializer=handler.response_serializer,
    )
