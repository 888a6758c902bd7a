"""Requests the HTTP parser refuses get the gateway's JSON error body, like every other refusal (real process)."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
import requests

from tests.fixtures.gwproc import GatewayProcess
from tests.fixtures.procs import free_port


@pytest.fixture(scope="module")
def gateway() -> Iterator[GatewayProcess]:
    gw = GatewayProcess(f"127.0.0.1:{free_port()}").start()
    yield gw
    gw.stop()


def test_a_request_line_over_the_parser_limit_gets_the_json_error_body(gateway: GatewayProcess) -> None:
    url = gateway.url + "/v1/accounts/0x" + "ab" * 20 + "/keys?cursor=" + "A" * 9000
    resp = requests.get(url, timeout=10)
    assert resp.status_code == 414
    assert resp.headers["Content-Type"].startswith("application/json")
    error = resp.json()["error"]
    assert error["code"] == "URI_TOO_LONG"
    assert "8192" in error["message"]


def test_a_malformed_request_gets_the_json_error_body(gateway: GatewayProcess) -> None:
    with socket.create_connection(("127.0.0.1", gateway.port), timeout=10) as s:
        s.sendall(b"GET /v1/openapi.json HTTP/1.1\r\nHost: x\r\nBad Header Line\r\n\r\n")
        data = b""
        while b"\r\n\r\n" not in data or not data.rstrip().endswith(b"}"):
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    assert head.split(b" ")[1] == b"400"  # aiohttp answers an unparsable request as HTTP/1.0
    assert b"application/json" in head
    assert b'"code": "INVALID_ARGUMENT"' in body or b'"code":"INVALID_ARGUMENT"' in body
    # the gateway still serves the next client
    assert requests.get(gateway.url + "/v1/openapi.json", timeout=10).status_code == 200
