"""The HTTP parser's limits, on the real `chain-gateway` process: a URL over the request-line limit is 414
`URI_TOO_LONG`, a header over the header limit (or too many headers) is 431 `HEADERS_TOO_LARGE`, each with the
JSON error body and a message that names the limit (not aiohttp's own text); requests just under the limits
are served, and the gateway serves the next client."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from gateway.protocol import MAX_HEADER_FIELD, MAX_REQUEST_LINE
from tests.fixtures.gwproc import GatewayProcess
from tests.fixtures.procs import free_port


@pytest.fixture(scope="module")
def gateway() -> Iterator[GatewayProcess]:
    gw = GatewayProcess(f"127.0.0.1:{free_port()}").start()  # no node behind it: the parser answers first
    yield gw
    gw.stop()


def error_of(resp: requests.Response, status: int) -> dict[str, Any]:
    assert resp.status_code == status, resp.text
    assert resp.headers["Content-Type"].startswith("application/json")
    body = resp.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message", "details"}, body
    error: dict[str, Any] = body["error"]
    assert "Got more than" not in error["message"] and "b'" not in error["message"]  # not aiohttp's text
    return error


def test_a_100_kb_url_is_414(gateway: GatewayProcess) -> None:
    url = gateway.url + "/v1/projects?owner_address=0x" + "ab" * 50_000
    error = error_of(requests.get(url, timeout=10), 414)
    assert error["code"] == "URI_TOO_LONG"
    assert str(MAX_REQUEST_LINE) in error["message"]
    assert requests.get(gateway.url + "/v1/openapi.json", timeout=10).status_code == 200


def test_a_url_just_under_the_limit_is_routed(gateway: GatewayProcess) -> None:
    line = len("GET  HTTP/1.1")
    path = "/v1/openapi.json?x=" + "a" * (MAX_REQUEST_LINE - line - len("/v1/openapi.json?x=") - 10)
    assert requests.get(gateway.url + path, timeout=10).status_code == 200


def test_a_large_header_is_431(gateway: GatewayProcess) -> None:
    resp = requests.get(gateway.url + "/v1/openapi.json", headers={"X-Big": "v" * 100_000}, timeout=10)
    error = error_of(resp, 431)
    assert error["code"] == "HEADERS_TOO_LARGE"
    assert str(MAX_HEADER_FIELD) in error["message"]
    under = {"X-Big": "v" * (MAX_HEADER_FIELD - 100)}
    assert requests.get(gateway.url + "/v1/openapi.json", headers=under, timeout=10).status_code == 200


def test_too_many_headers_is_431(gateway: GatewayProcess) -> None:
    head = b"GET /v1/openapi.json HTTP/1.1\r\nHost: x\r\n" + b"".join(b"X-H%d: v\r\n" % i for i in range(40_000))
    with socket.create_connection(("127.0.0.1", gateway.port), timeout=10) as s:
        with contextlib.suppress(OSError):  # the gateway may answer and close before reading every header
            s.sendall(head + b"\r\n")
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    status_line, _, rest = data.partition(b"\r\n")
    assert status_line.split(b" ")[1] == b"431", data[:300]
    assert b"HEADERS_TOO_LARGE" in rest
