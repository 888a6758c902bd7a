"""CORS for the origins given with `--cors-origin` (repeatable; `*` allows any origin), by the one rule the
node's gRPC-web endpoint uses too (`node.grpcweb.cors.CorsPolicy`: origins, header lists, max age).

- Every response (JSON, SSE streams, gRPC-web passthrough) to a request whose `Origin` is allowed carries
  `Access-Control-Allow-Origin` and `Vary: Origin`, plus `Access-Control-Expose-Headers` so browser code
  can read gRPC-web trailers sent as headers and the reason code. It is added in `on_response_prepare`,
  i.e. before a stream's headers go out, so stream handlers need do nothing.
- A preflight (`OPTIONS` with `Access-Control-Request-Method`) from an allowed origin for GET or POST is
  answered 204 here, for any path; from another origin or for another method 403 with the error body.
- Requests without `Origin` (curl, servers, apps), and requests from origins not allowed, are served
  without CORS headers (a browser then refuses the answer to the page).
"""

from __future__ import annotations

from aiohttp import web

from gateway.errors import Handler, error_response
from gateway.keys import CONFIG, CORS
from node.errors import Reason
from node.grpcweb.cors import CorsPolicy, vary_with_origin

METHODS = ("GET", "POST")  # the gateway serves reads (GET) besides writes and gRPC-web (POST)


@web.middleware
async def preflight_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    if request.method != "OPTIONS" or "Access-Control-Request-Method" not in request.headers:
        return await handler(request)
    cors = request.app[CORS]
    allowed = cors.preflight_origin(request.headers.get("Origin"), request.headers["Access-Control-Request-Method"])
    if allowed is None:
        return error_response(403, Reason.PERMISSION_DENIED, "CORS preflight refused: origin or method not allowed")
    return web.Response(status=204, headers=cors.preflight_headers(allowed))


async def cors_headers(request: web.Request, response: web.StreamResponse) -> None:
    allowed = request.app[CORS].allow_origin(request.headers.get("Origin"))
    if allowed is None:
        return
    vary = response.headers.get("Vary")
    response.headers.update(request.app[CORS].response_headers(allowed))
    response.headers["Vary"] = vary_with_origin(vary)


def setup_cors(app: web.Application) -> None:
    app[CORS] = CorsPolicy.build(app[CONFIG].cors_origins, methods=METHODS)
    app.middlewares.append(preflight_middleware)
    if app[CORS].origins:  # with no `--cors-origin` no response carries CORS headers: no per-response hook
        app.on_response_prepare.append(cors_headers)
