"""TLS on the gateway's hops: to a TLS node (public `grpcs://`, the internal listener with the gateway's client
certificate, the gRPC-web passthrough to `https://`), and on its own HTTP listener. Real nodes and gateways."""

from __future__ import annotations

import logging
import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from chain.v1 import rpc_pb2
from gateway.app import build_app
from gateway.config import GatewayConfig
from gateway.keys import NODES
from gateway.serve import listener_tls
from node.tls import plaintext_warning
from tests.fixtures.certs import Leaf, TestCA
from tests.fixtures.gwproc import GatewayProcess
from tests.fixtures.nodeproc import NodeProcess, NodeTLSFiles
from tests.gateway.grpcweb_frames import GRPC_WEB, frame, unary

ACCOUNT = "/v1/accounts/0x" + "11" * 20  # any address is an account: a read by method path (batched)


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> TestCA:
    return TestCA.make(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def gateway_leaf(ca: TestCA) -> Leaf:
    """The gateway's certificate: its client certificate for the internal listener and its listener's own."""
    return ca.issue("gateway")


@pytest.fixture(scope="module")
def tls_node(tmp_path_factory: pytest.TempPathFactory, ca: TestCA) -> Iterator[NodeProcess]:
    node = NodeProcess(tmp_path_factory.mktemp("tls-node") / "data", tls=NodeTLSFiles.issue(ca, "n0")).start()
    yield node
    node.stop()


def node_flags(node: NodeProcess, ca: TestCA, leaf: Leaf, internal: str) -> list[str]:
    return [
        "--node-ca-file", str(ca.cert), "--node-internal-addr", internal,
        "--node-tls-cert", str(leaf.cert), "--node-tls-key", str(leaf.key), "--node-web-url", node.web_url,
    ]  # fmt: skip


def test_every_hop_over_tls(tls_node: NodeProcess, ca: TestCA, gateway_leaf: Leaf) -> None:
    """A gateway serving https in front of a TLS node: reads (batched on the internal listener, mutual TLS),
    health, an SSE stream and the gRPC-web passthrough to the node's https:// listener."""
    args = [
        *node_flags(tls_node, ca, gateway_leaf, f"grpcs://{tls_node.internal_target}"),
        "--tls-cert", str(gateway_leaf.cert), "--tls-key", str(gateway_leaf.key),
    ]  # fmt: skip
    gw = GatewayProcess(tls_node.grpcs_target, args=args).start()
    try:
        assert gw.url.startswith("https://")
        get = lambda path: requests.get(gw.url + path, verify=str(ca.cert), timeout=20)  # noqa: E731
        assert get("/v1/node/status").json()["network"] == "devnet"
        assert get(ACCOUNT).status_code == 200
        assert get("/v1/health").status_code == 200
        with requests.get(gw.url + "/v1/events/blocks", verify=str(ca.cert), stream=True, timeout=20) as events:
            assert events.status_code == 200
            assert next(events.iter_lines()).startswith(b"retry:")
        resp = requests.post(
            gw.url + "/v1/grpc-web/chain.v1.ChainService/GetNodeStatus",
            data=frame(b""), headers=GRPC_WEB, verify=str(ca.cert), timeout=20,
        )  # fmt: skip
        message, trailers = unary(resp.content)
        assert "grpc-status:0" in trailers.replace(" ", "")
        assert rpc_pb2.GetNodeStatusResponse.FromString(message).status.network == "devnet"
        with pytest.raises(requests.exceptions.ConnectionError):  # plaintext to the TLS listener: no answer
            requests.get(gw.url.replace("https://", "http://") + "/v1/node/status", timeout=10)
    finally:
        gw.stop()


def tls_config(node: NodeProcess, ca: Path, leaf: Leaf | None, **overrides: Any) -> GatewayConfig:
    values: dict[str, Any] = {
        "http_addr": "127.0.0.1:0",
        "node_addrs": (node.grpcs_target,),
        "node_internal_addrs": (node.internal_target,),  # bare: TLS, since a client certificate is given
        "node_ca_file": ca,
        "node_tls_cert": leaf.cert if leaf else None,
        "node_tls_key": leaf.key if leaf else None,
        "node_web_url": node.web_url,
    }
    return GatewayConfig(**{**values, **overrides})


async def test_reads_are_batched_on_the_internal_listener(
    tls_node: NodeProcess, ca: TestCA, gateway_leaf: Leaf, aiohttp_client: Any
) -> None:
    client = await aiohttp_client(build_app(tls_config(tls_node, ca.cert, gateway_leaf)))
    for _ in range(3):
        resp = await client.get(ACCOUNT)
        assert resp.status == 200, await resp.text()
    pool = client.app[NODES]
    assert pool.readers is not pool.upstreams and pool.readers[0].secure
    assert pool.readers[0].batcher.streamed > 0  # on the node's ReadStream, internal listener, mutual TLS
    assert pool.upstreams[0].batcher.batched_items == 0


async def test_a_node_certificate_of_another_ca_is_refused(
    tls_node: NodeProcess, tmp_path: Path, gateway_leaf: Leaf, aiohttp_client: Any
) -> None:
    stranger = TestCA.make(tmp_path / "other")
    config = tls_config(tls_node, stranger.cert, gateway_leaf, request_timeout=3.0, read_retries=0)
    client = await aiohttp_client(build_app(config))
    for path in ("/v1/node/status", ACCOUNT):
        resp = await client.get(path)
        assert resp.status == 503, await resp.text()
        assert (await resp.json())["error"]["code"] == "UNAVAILABLE"


def test_the_gateway_listener_serves_tls_with_workers(node: NodeProcess, ca: TestCA, gateway_leaf: Leaf) -> None:
    args = ["--tls-cert", str(gateway_leaf.cert), "--tls-key", str(gateway_leaf.key), "--workers", "2"]
    gw = GatewayProcess(node.grpc_target, args=args).start()
    try:
        for _ in range(4):  # dealt to both workers
            resp = requests.get(gw.url + "/v1/node/status", verify=str(ca.cert), timeout=20)
            assert resp.status_code == 200
        with pytest.raises(requests.exceptions.SSLError):  # the certificate is checked: another CA fails
            requests.get(gw.url + "/v1/node/status", verify=ssl.get_default_verify_paths().cafile or True, timeout=10)
    finally:
        gw.stop()


def test_a_plaintext_listener_beyond_loopback_is_said_in_one_line(
    caplog: pytest.LogCaptureFixture, gateway_leaf: Leaf
) -> None:
    exposed = GatewayConfig(http_addr="0.0.0.0:8080")
    with caplog.at_level(logging.WARNING):
        assert listener_tls(exposed) is None
    said = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert said == [plaintext_warning("chain-gateway", "--http-addr", "0.0.0.0:8080")]
    assert "\n" not in said[0] and "--http-addr 0.0.0.0:8080" in said[0]
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        assert listener_tls(GatewayConfig(http_addr="127.0.0.1:8080")) is None  # loopback: nothing to say
        served = listener_tls(
            GatewayConfig(http_addr="0.0.0.0:8080", tls_cert=gateway_leaf.cert, tls_key=gateway_leaf.key)
        )
        assert served is not None
    assert not [r for r in caplog.records if r.levelno == logging.WARNING]
