"""CORS for the origins given with `--cors-origin` (repeatable; `*` allows any origin).

- Every response (JSON, SSE streams, gRPC-web passthrough) to a request whose `Origin` is allowed carries
  `Access-Control-Allow-Origin` and `Vary: Origin`, plus `Access-Control-Expose-Headers` so browser code
  can read gRPC-web trailers sent as headers. It is added in `on_response_prepare`, i.e. before a stream's
  headers go out, so stream handlers need do nothing.
- A preflight (`OPTIONS` with `Access-Control-Request-Method`) from an allowed origin for GET or POST is
  answered 204 here, for any path; from another origin or for another method 403 with the error body.
- Requests without `Origin` (curl, servers, apps), and requests from origins not allowed, are served
  without CORS headers (a browser then refuses the answer to the page).
"""

from __future__ import annotations

from aiohttp import web

from gateway.errors import Handler, error_response
from gateway.keys import CONFIG

ALLOW_METHODS = "GET, POST, OPTIONS"
ALLOW_HEADERS = "content-type, last-event-id, x-grpc-web, x-user-agent, grpc-timeout, authorization"
EXPOSE_HEADERS = "grpc-status, grpc-message, grpc-status-details-bin, reason-code, reason-values, field"
MAX_AGE = "600"


def allowed_origin(app: web.Application, origin: str | None) -> str | None:
    """The value for Access-Control-Allow-Origin, or None when `origin` is not allowed."""
    if not origin:
        return None
    origins = app[CONFIG].cors_origins
    if origin in origins:
        return origin
    if "*" in origins:
        return "*"
    return None


@web.middleware
async def preflight_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    if request.method != "OPTIONS" or "Access-Control-Request-Method" not in request.headers:
        return await handler(request)
    allow = allowed_origin(request.app, request.headers.get("Origin"))
    wanted = request.headers["Access-Control-Request-Method"].upper()
    if allow is None or wanted not in ("GET", "POST"):
        return error_response(403, "PERMISSION_DENIED", "CORS preflight refused: origin or method not allowed")
    return web.Response(
        status=204,
        headers={
            "Access-Control-Allow-Methods": ALLOW_METHODS,
            "Access-Control-Allow-Headers": ALLOW_HEADERS,
            "Access-Control-Max-Age": MAX_AGE,
        },
    )


async def cors_headers(request: web.Request, response: web.StreamResponse) -> None:
    allow = allowed_origin(request.app, request.headers.get("Origin"))
    if allow is None:
        return
    response.headers["Access-Control-Allow-Origin"] = allow
    response.headers["Access-Control-Expose-Headers"] = EXPOSE_HEADERS
    if allow != "*":
        vary = response.headers.get("Vary")
        if not vary:
            response.headers["Vary"] = "Origin"
        elif "origin" not in vary.lower():
            response.headers["Vary"] = vary + ", Origin"


def setup_cors(app: web.Application) -> None:
    app.middlewares.append(preflight_middleware)
    app.on_response_prepare.append(cors_headers)
