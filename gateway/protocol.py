"""HTTP protocol errors answered in the gateway's own error format.

aiohttp answers a request it cannot parse (a request line or header over its limits, a malformed request)
before any middleware runs, with a `text/plain` body. Every other answer of the gateway is the JSON error
body of DESIGN section 9, and the OpenAPI document promises JSON: `JsonErrorHandler` makes these answers the
same JSON: 414 `URI_TOO_LONG` for a request line over `MAX_REQUEST_LINE` bytes, 431 `HEADERS_TOO_LARGE` for a
header over `MAX_HEADER_FIELD` bytes (or too many headers), `INVALID_ARGUMENT` for any other request the parser
refused and `INTERNAL` for a failure of the server.
"""

from __future__ import annotations

import json
from http import HTTPStatus

from aiohttp import web
from aiohttp.http_exceptions import BadHttpMessage, LineTooLong
from aiohttp.web_protocol import RequestHandler
from aiohttp.web_request import BaseRequest

from gateway.errors import ProtocolReason, error_body
from node.errors import Reason

# The parser's limits. They differ by design: the limit a `LineTooLong` names says which one was crossed.
MAX_REQUEST_LINE = 8192  # method, URL and version: over it, 414
MAX_HEADER_FIELD = 8190  # one header, name and value: over it, 431
assert MAX_REQUEST_LINE != MAX_HEADER_FIELD


def refusal(status: int, exc: BaseException | None, message: str | None) -> tuple[int, str, str]:
    """(status, code, message) of a request the parser refused (or of a server failure, `status` >= 500)."""
    if isinstance(exc, LineTooLong):
        if exc.args[1] == MAX_REQUEST_LINE:
            text = f"the request line (method, URL, version) is over {MAX_REQUEST_LINE} bytes: shorten the URL"
            return HTTPStatus.REQUEST_URI_TOO_LONG, ProtocolReason.URI_TOO_LONG, text
        text = f"a request header (name and value) is over {MAX_HEADER_FIELD} bytes"
        return HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, ProtocolReason.HEADERS_TOO_LARGE, text
    if isinstance(exc, BadHttpMessage) and "too many headers" in str(exc).lower():
        text = "too many request headers"
        return HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, ProtocolReason.HEADERS_TOO_LARGE, text
    if status >= HTTPStatus.INTERNAL_SERVER_ERROR:
        return status, Reason.INTERNAL, HTTPStatus(status).phrase
    return status, Reason.INVALID_ARGUMENT, message or HTTPStatus(status).phrase


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
        status, code, text = refusal(status, exc, message)
        response = web.Response(
            status=status, body=json.dumps(error_body(code, text)).encode(), content_type="application/json"
        )
        response.force_close()
        return response


def json_error_protocol(server: web.Server) -> JsonErrorHandler:
    """A protocol for one connection of `server`, as `server()` would make it, with JSON error answers and the
    gateway's parser limits."""
    limits = {"max_line_size": MAX_REQUEST_LINE, "max_field_size": MAX_HEADER_FIELD}
    return JsonErrorHandler(server, loop=server._loop, **{**server._kwargs, **limits})
