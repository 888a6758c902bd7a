"""gRPC-web passthrough: `POST /v1/grpc-web/{service}/{method}` → `{--node-web-url}/{service}/{method}`,
or, without `--node-web-url`, onto the nodes' native gRPC (`gateway.rest.grpcweb_bridge`).

The request body (gRPC-web frames, binary or text mode) goes to the node unchanged and the node's answer
comes back unchanged: status, content type, `grpc-*` headers and the body, chunk by chunk as the node
writes it (so server-streaming calls such as `SubscribeBlocks` stream). Nothing is decoded or re-encoded.
An `https://` node URL is checked against `--node-ca-file`.
CORS is the gateway's (see `cors.py`); the browser's `Origin` is not forwarded, nor any of the members'
own metadata (`chain-member-proof`, gateway/internal.py). A request that is not
gRPC-web (its Content-Type) is answered here in both modes: 415 with the JSON error body.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import aiohttp
from aiohttp import web

from gateway.errors import ApiError
from gateway.internal import is_internal
from gateway.keys import CONFIG, GRPC_WEB_SESSION
from gateway.rest.grpcweb_bridge import bridge
from gateway.upstream import NodeTLS
from node.errors import Reason
from node.grpcweb.wire import parse_content_type

# How often an idle stream checks that its client is still there. chain-gateway runs aiohttp with handler
# cancellation, which ends a stream at once when its client leaves; this covers other runners.
DISCONNECT_POLL = 1.0

# Not forwarded upstream: hop-by-hop, the gateway's own host, CORS, and what aiohttp sets itself.
DROP_REQUEST = frozenset(
    {
        "host",
        "connection",
        "keep-alive",
        "proxy-connection",
        "transfer-encoding",
        "te",
        "upgrade",
        "content-length",
        "origin",
        "referer",
        "access-control-request-method",
        "access-control-request-headers",
        "accept-encoding",
        "cookie",
    }
)
DROP_RESPONSE = frozenset({"connection", "keep-alive", "transfer-encoding", "content-length", "server", "date", "vary"})


async def _session(app: web.Application) -> AsyncIterator[None]:
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=10)
    # an https:// --node-web-url is checked against --node-ca-file (the system's roots without one)
    connector = aiohttp.TCPConnector(ssl=NodeTLS.of(app[CONFIG]).public.ssl_context())
    app[GRPC_WEB_SESSION] = aiohttp.ClientSession(timeout=timeout, auto_decompress=False, connector=connector)
    yield
    await app[GRPC_WEB_SESSION].close()


async def passthrough(request: web.Request) -> web.StreamResponse:
    parsed = parse_content_type(request.headers.get("Content-Type"))
    if parsed is None:  # answered here in both modes, as the JSON error body
        accepted = ["application/grpc-web+proto", "application/grpc-web-text+proto"]
        raise ApiError(415, Reason.UNSUPPORTED_MEDIA_TYPE, "not a gRPC-web content type", accepted=accepted)
    base = request.app[CONFIG].node_web_url.rstrip("/")
    if not base:
        return await bridge(request, *parsed)
    service, method = request.match_info["service"], request.match_info["method"]
    headers = {
        k: v
        for k, v in request.headers.items()
        if k.lower() not in DROP_REQUEST and not k.startswith(":") and not is_internal(k)
    }
    body = await request.read()
    try:
        upstream = await request.app[GRPC_WEB_SESSION].post(f"{base}/{service}/{method}", data=body, headers=headers)
    except aiohttp.ClientError as err:
        raise ApiError(503, Reason.UNAVAILABLE, f"node gRPC-web endpoint unreachable: {err}") from None
    async with upstream:
        response = web.StreamResponse(status=upstream.status, reason=upstream.reason)
        for key, value in upstream.headers.items():
            if key.lower() not in DROP_RESPONSE:
                response.headers.add(key, value)
        if upstream.headers.get("Content-Length") is not None:
            response.content_length = int(upstream.headers["Content-Length"])
        await response.prepare(request)
        while True:
            try:
                chunk = await asyncio.wait_for(upstream.content.readany(), DISCONNECT_POLL)
            except TimeoutError:
                if request.transport is None or request.transport.is_closing():
                    return response  # the client left (runners without handler cancellation)
                continue
            if not chunk:
                break
            await response.write(chunk)
        await response.write_eof()
    return response


def setup_grpc_web(app: web.Application) -> None:
    app.cleanup_ctx.append(_session)
    app.router.add_post("/v1/grpc-web/{service}/{method}", passthrough, name="grpcweb.passthrough")
