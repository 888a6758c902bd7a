"""Gateway connection hygiene (header deadline, idle timeout, connection cap), real sockets, a chain-gateway process.

A slowloris (one client, many connections, each sending a header line every half second and never
finishing its headers) is cut within `--header-timeout` while a normal client is served meanwhile; idle
keep-alive connections close after `--idle-timeout`; connections beyond `--max-connections` are closed at
once. No node is needed: the OpenAPI document is served by the gateway itself."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest
import requests

from tests.fixtures.gwproc import GatewayProcess
from tests.fixtures.procs import free_port

SLOW = 40


def start(*args: str) -> GatewayProcess:
    return GatewayProcess(f"127.0.0.1:{free_port()}", args=args).start()


@pytest.fixture(scope="module")
def strict() -> Iterator[GatewayProcess]:
    # a long idle timeout: only the header deadline can cut the slowloris quickly
    gw = start("--header-timeout", "2", "--idle-timeout", "60", "--max-connections", "60")
    yield gw
    gw.stop()


def connect(port: int) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.setblocking(False)
    return s


def closed(s: socket.socket) -> bool:
    """The server closed this connection (EOF or reset); False while it is open with nothing to read."""
    try:
        return s.recv(4096) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


def served(gw: GatewayProcess) -> bool:
    return requests.get(gw.url + "/v1/openapi.json", timeout=5).status_code == 200


def test_a_slowloris_is_cut_at_the_header_deadline_and_others_are_served(strict: GatewayProcess) -> None:
    socks = [connect(strict.port) for _ in range(SLOW)]
    try:
        for s in socks:
            s.send(b"GET /v1/openapi.json HTTP/1.1\r\nHost: x\r\n")
        started = time.monotonic()
        open_socks = list(socks)
        checked_normal = False
        while open_socks and time.monotonic() - started < 15:
            for s in list(open_socks):
                try:
                    s.send(b"X-Slow: 1\r\n")  # one more header line, never the blank line that ends them
                except OSError:
                    open_socks.remove(s)
                    continue
                if closed(s):
                    open_socks.remove(s)
            if not checked_normal:
                assert served(strict)  # a normal client, during the attack
                checked_normal = True
            time.sleep(0.5)
        took = time.monotonic() - started
        assert not open_socks, f"{len(open_socks)} slow connections still open after {took:.1f} s"
        assert took < 10  # header deadline 2 s (the idle timeout is 60 s)
        assert served(strict)
    finally:
        for s in socks:
            s.close()


def test_connections_over_the_cap_are_closed_at_once(strict: GatewayProcess) -> None:
    socks = [connect(strict.port) for _ in range(70)]  # the cap is 60
    try:
        time.sleep(1.0)  # under the 2 s header deadline: only the cap closes anything yet
        refused = sum(closed(s) for s in socks)
        assert refused >= 10
    finally:
        for s in socks:
            s.close()
    time.sleep(0.5)
    assert served(strict)


def test_an_idle_keep_alive_connection_is_closed() -> None:
    gw = start("--header-timeout", "30", "--idle-timeout", "1")
    try:
        s = socket.create_connection(("127.0.0.1", gw.port), timeout=10)
        s.sendall(b"GET /v1/openapi.json HTTP/1.1\r\nHost: x\r\n\r\n")
        got = b""
        while b"\r\n\r\n" not in got:
            got += s.recv(65536)
        assert got.startswith(b"HTTP/1.1 200")
        s.settimeout(10)
        started = time.monotonic()
        while True:  # the rest of the body, then EOF when the idle timeout closes the connection
            chunk = s.recv(65536)
            if not chunk:
                break
        assert time.monotonic() - started < 8
        s.close()
    finally:
        gw.stop()
