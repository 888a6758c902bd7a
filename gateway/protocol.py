"""HTTP protocol errors answered in the gateway's own error format.

aiohttp answers a request it cannot parse (a request line or header over its limits, a malformed request)
before any middleware runs, with a `text/plain` body. Every other answer of the gateway is the JSON error
body of DESIGN section 9, and the OpenAPI document promises JSON: `JsonErrorHandler` makes these answers the
same JSON, with `INVALID_ARGUMENT` for a request the parser refused and `INTERNAL` for a failure of the server.
"""

from __future__ import annotations

import json
from http import HTTPStatus

from aiohttp import web
from aiohttp.web_protocol import RequestHandler
from aiohttp.web_request import BaseRequest

from gateway.errors import error_body
from node.errors import Reason


class JsonErrorHandler(RequestHandler):
    """aiohttp's per-connection protocol, whose own error answers carry the JSON error body."""

    def handle_error(
        self,
        request: BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        # aiohttp's own handling logs the error and refuses once bytes went out; its plain-text answer is replaced.
        super().handle_error(request, status, exc, message)
        code = Reason.INTERNAL if status >= HTTPStatus.INTERNAL_SERVER_ERROR else Reason.INVALID_ARGUMENT
        text = message if status < HTTPStatus.INTERNAL_SERVER_ERROR and message else HTTPStatus(status).phrase
        response = web.Response(
            status=status, body=json.dumps(error_body(code, text)).encode(), content_type="application/json"
        )
        response.force_close()
        return response


def json_error_protocol(server: web.Server) -> JsonErrorHandler:
    """A protocol for one connection of `server`, as `server()` would make it, with JSON error answers."""
    return JsonErrorHandler(server, loop=server._loop, **server._kwargs)
