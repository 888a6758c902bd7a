"""Errors to HTTP: the one middleware where every failure becomes a status and the JSON error body.

    {"error": {"code": "NONCE_MISMATCH", "message": "...", "details": {"expected": 4, "got": 6}}}

- A gRPC error from a node: `code` is the node's `reason-code` trailer (the gRPC status name when there is
  none); the status is `REASON_HTTP_STATUS[code]`, the HTTP status of the reason's category in
  node/reasons.py (413 for the size reasons, 429 for the other `RESOURCE_EXHAUSTED` ones), or
  `GRPC_HTTP_STATUS` of the gRPC status when the node named no reason this gateway knows; `details` holds
  the `reason-values` and `field` trailers.
  Ids the node's message or values name as bare hex (a 20-byte address, a 32-byte hash) are written
  0x-prefixed, as every read shows them (`with_0x`).
  A retryable refusal (429 `MEMPOOL_FULL`; 503 `NOT_LEADER`, `STORAGE_FAILED`, `DRAINING`) also gets a
  `Retry-After` header (whole seconds, rounded up, at least 1) from the node's `retry-after-ms` trailer.
- `ApiError`, raised by the gateway itself (request validation, body decoding, passthrough), with a
  `Reason` as its code and that reason's status.
- aiohttp's HTTP errors (unknown route, wrong method, body too large) keep their status.
- Anything else is a 500 `INTERNAL` with its traceback logged and no detail sent.

Handlers never build an error response by hand: they raise.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Awaitable, Callable, Mapping
from enum import StrEnum
from types import MappingProxyType
from typing import Any

import grpc
from aiohttp import web

from node.errors import FIELD, REASON_CODE, REASON_VALUES, RETRY_AFTER_MS, Reason, trailer
from node.reasons import CATEGORY, known_reason

log = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

R = Reason

# A bare 20- or 32-byte hex value (an address, a hash) in a node's message, not already 0x-prefixed.
BARE_ID = re.compile(r"(?<![0-9A-Za-z])([0-9a-fA-F]{64}|[0-9a-fA-F]{40})(?![0-9A-Za-z])")


def with_0x(text: str) -> str:
    """`text` with each bare 20- or 32-byte hex id 0x-prefixed."""
    return BARE_ID.sub(r"0x\1", text)


# A node's failure without a reason this gateway knows: the HTTP status of its gRPC status (else 500).
GRPC_HTTP_STATUS: Mapping[grpc.StatusCode, int] = MappingProxyType(
    {
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
        grpc.StatusCode.DATA_LOSS: 503,
    }
)


# Every reason's HTTP status: its category's (node/reasons.py, the one table the node's gRPC statuses come
# from too; tests/gateway/test_error_tables.py checks it is total).
REASON_HTTP_STATUS: Mapping[Reason, int] = MappingProxyType(
    {reason: category.value.http for reason, category in CATEGORY.items()}
)

# The code of an aiohttp HTTP error (unknown route, wrong method, body too large) by its status.
HTTP_CODES: Mapping[int, Reason] = MappingProxyType(
    {
        400: R.INVALID_ARGUMENT,
        401: R.UNAUTHENTICATED,
        403: R.PERMISSION_DENIED,
        404: R.NOT_FOUND,
        405: R.METHOD_NOT_ALLOWED,
        406: R.NOT_ACCEPTABLE,
        409: R.CONFLICT,
        413: R.PAYLOAD_TOO_LARGE,
        415: R.UNSUPPORTED_MEDIA_TYPE,
        429: R.RESOURCE_EXHAUSTED,
        500: R.INTERNAL,
        501: R.UNIMPLEMENTED,
        502: R.BAD_GATEWAY,
        503: R.UNAVAILABLE,
        504: R.DEADLINE_EXCEEDED,
    }
)


class ProtocolReason(StrEnum):
    """The answers of the HTTP parser itself, before any route (gateway.protocol): codes beside `Reason`'s."""

    URI_TOO_LONG = "URI_TOO_LONG"  # 414: the request line is over the parser's limit
    HEADERS_TOO_LARGE = "HEADERS_TOO_LARGE"  # 431: a header is over the parser's limit, or there are too many


# Set on a request once its response has been prepared (headers sent): an error after that point can
# no longer become an error response, it can only end the stream.
PREPARED: web.RequestKey[bool] = web.RequestKey("prepared", bool)


class ApiError(Exception):
    """A failure the gateway answers itself, with its HTTP status, a stable code and details."""

    def __init__(self, status: int, code: Reason, message: str, **details: Any) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.details = details


def invalid_argument(field: str, message: str, **details: Any) -> ApiError:
    return ApiError(REASON_HTTP_STATUS[R.INVALID_ARGUMENT], R.INVALID_ARGUMENT, message, field=field, **details)


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


def http_status(reason: str | None, grpc_status: grpc.StatusCode) -> int:
    """The HTTP status of a node's failure: by its reason when this gateway knows it, else by its gRPC status."""
    known = known_reason(reason)
    if known is not None:
        return REASON_HTTP_STATUS[known]
    return GRPC_HTTP_STATUS.get(grpc_status, 500)


def grpc_error(err: grpc.aio.AioRpcError) -> tuple[int, str, str, dict[str, Any]]:
    """(HTTP status, code, message, details) for a failed node call."""
    trailers = err.trailing_metadata()
    reason = trailer(trailers, REASON_CODE)
    code = reason or err.code().name
    status = http_status(reason, err.code())
    details: dict[str, Any] = {}
    raw = trailer(trailers, REASON_VALUES)
    if raw:
        try:
            values = json.loads(raw)
        except ValueError:
            values = {"reason_values": raw}
        if isinstance(values, dict):
            details.update({k: with_0x(v) if isinstance(v, str) else v for k, v in values.items()})
    field = trailer(trailers, FIELD)
    if field is not None:
        details[FIELD] = field
    details["grpc_status"] = err.code().name
    return status, code, with_0x(err.details() or err.code().name.lower()), details


def retry_after(err: grpc.aio.AioRpcError) -> dict[str, str]:
    """The `Retry-After` header for a refusal that carries `retry-after-ms` (none otherwise)."""
    raw = trailer(err.trailing_metadata(), RETRY_AFTER_MS) or ""
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
        code = HTTP_CODES.get(exc.status) or "HTTP_" + str(exc.status)
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
        return error_response(REASON_HTTP_STATUS[R.INTERNAL], R.INTERNAL, "internal error")


async def mark_prepared(request: web.Request, response: web.StreamResponse) -> None:
    """`on_response_prepare` hook: remember that this request's headers are on their way."""
    request[PREPARED] = True


def setup_errors(app: web.Application) -> None:
    """Install the error middleware (outermost but CORS) and the prepared-response marker."""
    app.middlewares.append(error_middleware)
    app.on_response_prepare.append(mark_prepared)
