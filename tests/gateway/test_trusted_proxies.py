"""`--trusted-proxies`: X-Forwarded-For names the client only when the direct peer is a trusted proxy.

Real gateways in front of a real node; the test client (127.0.0.1) plays the proxy, trusted or not. The SSE
per-IP cap is 1, so a second stream keyed on the same client is refused 429."""

from __future__ import annotations

import contextlib
import ipaddress
from collections.abc import Iterator

import pytest
import requests

from gateway.clientip import ClientAddress
from tests.fixtures.gwproc import GatewayProcess
from tests.fixtures.nodeproc import NodeProcess
from tests.fixtures.procs import wait_until

A, B = "203.0.113.1", "198.51.100.2"


def logged(gw: GatewayProcess, client: str) -> bool:
    """An access line keyed on `client` was written."""
    return any(f"aiohttp.access {client} [" in line for line in gw.stderr_lines)


@contextlib.contextmanager
def gateway(node: NodeProcess, trusted: str) -> Iterator[GatewayProcess]:
    args = ["--sse-max-per-ip", "1", "--log-level", "info", "--trusted-proxies", trusted]
    gw = GatewayProcess(node.grpc_target, args=args).start()
    try:
        yield gw
    finally:
        gw.stop()


def stream(gw: GatewayProcess, forwarded: str) -> requests.Response:
    """An SSE stream opened as a proxy would open it for `forwarded` (left open while the test runs)."""
    headers = {"X-Forwarded-For": forwarded, "Accept": "text/event-stream"}
    return requests.get(gw.url + "/v1/events/blocks", headers=headers, stream=True, timeout=15)


def test_clients_behind_a_trusted_proxy_have_a_cap_each(node: NodeProcess) -> None:
    with gateway(node, "127.0.0.0/8") as gw:
        first, second = stream(gw, A), stream(gw, f"10.9.9.9, {B}")  # a client's own claim left of B is ignored
        try:
            assert (first.status_code, second.status_code) == (200, 200)
            again = stream(gw, f"{B}, {A}")  # the right-most hop names A whatever B says
            assert again.status_code == 429
            again.close()
        finally:
            first.close()
            second.close()
        requests.get(gw.url + "/v1/node/status", headers={"X-Forwarded-For": A}, timeout=10).raise_for_status()
        assert wait_until(lambda: logged(gw, A), 10), gw.stderr_lines


def test_the_header_from_an_untrusted_peer_is_ignored(node: NodeProcess) -> None:
    with gateway(node, "10.0.0.0/8") as gw:  # the test client, 127.0.0.1, is no trusted proxy
        first = stream(gw, A)
        try:
            assert first.status_code == 200
            second = stream(gw, B)  # another "client" by its header: the same peer, the same cap
            assert second.status_code == 429, "X-Forwarded-For was believed from an untrusted peer"
            second.close()
        finally:
            first.close()
        requests.get(gw.url + "/v1/node/status", headers={"X-Forwarded-For": A}, timeout=10).raise_for_status()
        assert wait_until(lambda: logged(gw, "127.0.0.1"), 10), gw.stderr_lines
        assert not logged(gw, A)


def networks(*cidrs: str) -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    return [ipaddress.ip_network(c) for c in cidrs]


@pytest.mark.parametrize(
    ("forwarded", "client"),
    [
        ("203.0.113.1", "203.0.113.1"),
        ("1.1.1.1, 203.0.113.1", "203.0.113.1"),  # the client's own claim, left of the untrusted hop
        ("203.0.113.1, 10.0.0.5", "203.0.113.1"),  # a second trusted proxy in the chain is skipped
        ("10.0.0.6, 10.0.0.5", "10.0.0.6"),  # every hop trusted: the left-most
        ("garbage, 10.0.0.5", "10.0.0.5"),  # not an address: the proxy that wrote it
        ("unknown", "10.0.0.1"),  # nothing usable: the peer
        ("[2001:db8::1]:4711", "2001:db8::1"),
        ("203.0.113.1:4711", "203.0.113.1"),
        ("::ffff:203.0.113.1", "203.0.113.1"),
    ],
)
def test_walk_right_to_left(forwarded: str, client: str) -> None:
    clients = ClientAddress(networks("10.0.0.0/8"))
    assert str(clients.walk(ipaddress.ip_address("10.0.0.1"), forwarded)) == client
