"""Errors to HTTP: the one middleware where every failure becomes a status and the JSON error body.

    {"error": {"code": "NONCE_MISMATCH", "message": "...", "details": {"expected": 4, "got": 6}}}

- A gRPC error from a node: the status follows `GRPC_HTTP_STATUS` (`RESOURCE_EXHAUSTED` is 413 for the
  size reasons in `SIZE_REASONS`, 429 otherwise; the retryable reasons of `RETRYABLE_REASONS` have their own
  status and a `Retry-After` header from the node's `retry-after-ms` trailer); `code` is the node's
  `reason-code` trailer (the gRPC status name when there is none); `details` holds the node's
  `reason-values` and `field` trailers.
- `ApiError`, raised by the gateway itself (request validation, body decoding, passthrough).
- aiohttp's HTTP errors (unknown route, wrong method, body too large) keep their status.
- Anything else is a 500 `INTERNAL` with its traceback logged and no detail sent.

Handlers never build an error response by hand: they raise.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, cast

import grpc
from aiohttp import web

log = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

GRPC_HTTP_STATUS: dict[grpc.StatusCode, int] = {
    grpc.StatusCode.INVALID_ARGUMENT: 400,
    grpc.StatusCode.OUT_OF_RANGE: 400,
    grpc.StatusCode.NOT_FOUND: 404,
    grpc.StatusCode.ALREADY_EXISTS: 409,
    grpc.StatusCode.FAILED_PRECONDITION: 409,
    grpc.StatusCode.ABORTED: 409,
    grpc.StatusCode.PERMISSION_DENIED: 403,
    grpc.StatusCode.UNAUTHENTICATED: 401,
    grpc.StatusCode.RESOURCE_EXHAUSTED: 429,
    grpc.StatusCode.UNAVAILABLE: 503,
    grpc.StatusCode.DEADLINE_EXCEEDED: 504,
}
# RESOURCE_EXHAUSTED reasons that are about the size of the request, not about load or quota.
SIZE_REASONS = frozenset({"MESSAGE_TOO_LARGE", "BATCH_TOO_LARGE"})
# Retryable refusals: their status whatever the gRPC code, and a `Retry-After` header (whole seconds, rounded
# up, at least 1) from the node's `retry-after-ms` trailer. 429: this client should slow down; 503: this node
# cannot take it now (another node, or the same one later, can).
RETRYABLE_REASONS: dict[str, int] = {"MEMPOOL_FULL": 429, "STORAGE_FAILED": 503, "NOT_LEADER": 503, "DRAINING": 503}

HTTP_CODES: dict[int, str] = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    405: "METHOD_NOT_ALLOWED",
    406: "NOT_ACCEPTABLE",
    409: "CONFLICT",
    413: "PAYLOAD_TOO_LARGE",
    415: "UNSUPPORTED_MEDIA_TYPE",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    501: "UNIMPLEMENTED",
    502: "BAD_GATEWAY",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}

# Set on a request once its response has been prepared (headers sent): an error after that point can
# no longer become an error response, it can only end the stream.
PREPARED: web.RequestKey[bool] = web.RequestKey("prepared", bool)


class ApiError(Exception):
    """A failure the gateway answers itself, with its HTTP status, a stable code and details."""

    def __init__(self, status: int, code: str, message: str, **details: Any) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.details = details


def invalid_argument(field: str, message: str, **details: Any) -> ApiError:
    return ApiError(400, "INVALID_ARGUMENT", message, field=field, **details)


def error_body(code: str, message: str, details: Mapping[str, Any] | None = None) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "details": dict(details or {})}}


def error_response(
    status: int,
    code: str,
    message: str,
    details: Mapping[str, Any] | None = None,
    headers: Mapping[str, str] | None = None,
) -> web.Response:
    return web.json_response(error_body(code, message, details), status=status, headers=headers)


def _trailers(err: grpc.aio.AioRpcError) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in err.trailing_metadata() or ():
        key, value = cast(tuple[str, str | bytes], item)
        out[key] = value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
    return out


def grpc_error(err: grpc.aio.AioRpcError) -> tuple[int, str, str, dict[str, Any]]:
    """(HTTP status, code, message, details) for a failed node call."""
    trailers = _trailers(err)
    code = trailers.get("reason-code") or err.code().name
    status = GRPC_HTTP_STATUS.get(err.code(), 500)
    if err.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and code in SIZE_REASONS:
        status = 413
    status = RETRYABLE_REASONS.get(code, status)
    details: dict[str, Any] = {}
    raw = trailers.get("reason-values")
    if raw:
        try:
            values = json.loads(raw)
        except ValueError:
            values = {"reason_values": raw}
        if isinstance(values, dict):
            details.update(values)
    if "field" in trailers:
        details["field"] = trailers["field"]
    details["grpc_status"] = err.code().name
    return status, code, err.details() or err.code().name.lower(), details


def retry_after(err: grpc.aio.AioRpcError) -> dict[str, str]:
    """The `Retry-After` header for a refusal that carries `retry-after-ms` (none otherwise)."""
    raw = _trailers(err).get("retry-after-ms", "")
    if not raw.isdigit():
        return {}
    return {"Retry-After": str(max(1, -(-int(raw) // 1000)))}


@web.middleware
async def error_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except grpc.aio.AioRpcError as err:
        if request.get(PREPARED):
            raise
        status, code, message, details = grpc_error(err)
        if status >= 500:
            log.warning("%s %s: node answered %s: %s", request.method, request.path, err.code().name, err.details())
        return error_response(status, code, message, details, retry_after(err))
    except ApiError as err:
        if request.get(PREPARED):
            raise
        return error_response(err.status, err.code, err.message, err.details)
    except web.HTTPException as exc:
        if exc.status < 400 or request.get(PREPARED):
            raise
        code = HTTP_CODES.get(exc.status, "HTTP_" + str(exc.status))
        extra: dict[str, Any] = {}
        headers: dict[str, str] = {}
        if isinstance(exc, web.HTTPMethodNotAllowed):
            extra["allowed_methods"] = sorted(exc.allowed_methods)
            headers["Allow"] = ", ".join(sorted(exc.allowed_methods))
        message = exc.text if exc.text and not exc.text.startswith(str(exc.status)) else (exc.reason or code)
        return error_response(exc.status, code, message, extra, headers)
    except Exception:
        if request.get(PREPARED):
            raise
        log.exception("%s %s failed", request.method, request.path)
        return error_response(500, "INTERNAL", "internal error")


async def mark_prepared(request: web.Request, response: web.StreamResponse) -> None:
    """`on_response_prepare` hook: remember that this request's headers are on their way."""
    request[PREPARED] = True


def setup_errors(app: web.Application) -> None:
    """Install the error middleware (outermost but CORS) and the prepared-response marker."""
    app.middlewares.append(error_middleware)
    app.on_response_prepare.append(mark_prepared)
