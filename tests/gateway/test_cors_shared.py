"""One CORS rule for both browser-facing listeners, over real sockets: a `chain-node` process (its gRPC-web
listener, `--cors-origin`) and a `chain-gateway` process in front of it (`--cors-origin`, the gRPC-web
passthrough). The same preflight gets the same allowed request headers, max age and origin from both, and
actual answers expose the same status and reason-code headers, because both read `node.grpcweb.cors`."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from node.grpcweb.cors import ALLOWED_REQUEST_HEADERS, EXPOSED_RESPONSE_HEADERS
from tests.fixtures.gwproc import GatewayProcess
from tests.fixtures.nodeproc import NodeProcess
from tests.gateway.conftest import ORIGIN

METHOD = "chain.v1.ChainService/GetNodeStatus"
GRPC_WEB = {"Content-Type": "application/grpc-web+proto", "X-Grpc-Web": "1"}
EMPTY_REQUEST = b"\x00\x00\x00\x00\x00"  # one data frame holding an empty GetNodeStatusRequest


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    """The node of this module's gateway (conftest's `gateway`), with CORS for the same origin."""
    proc = NodeProcess(Path(tmp_path_factory.mktemp("cors-node")) / "node", "--cors-origin", ORIGIN).start()
    try:
        yield proc
    finally:
        proc.stop()


def urls(node: NodeProcess, gateway_url: str) -> dict[str, str]:
    return {"node": f"{node.web_url}/{METHOD}", "gateway": f"{gateway_url}/v1/grpc-web/{METHOD}"}


def listed(value: str | None) -> list[str]:
    return [part.strip() for part in (value or "").split(",") if part.strip()]


def preflight(url: str, origin: str, method: str = "POST") -> requests.Response:
    headers = {
        "Origin": origin,
        "Access-Control-Request-Method": method,
        "Access-Control-Request-Headers": "content-type,x-grpc-web,x-user-agent,grpc-timeout",
    }
    return requests.options(url, headers=headers, timeout=10)


def test_the_same_preflight_gets_the_same_allowed_headers(node: NodeProcess, gateway: GatewayProcess) -> None:
    answers = {name: preflight(url, ORIGIN) for name, url in urls(node, gateway.url).items()}
    for name, resp in answers.items():
        assert resp.status_code == 204, name
        assert resp.headers["Access-Control-Allow-Origin"] == ORIGIN, name
        assert listed(resp.headers["Access-Control-Allow-Headers"]) == list(ALLOWED_REQUEST_HEADERS), name
        assert "Origin" in listed(resp.headers["Vary"]), name
        assert "POST" in listed(resp.headers["Access-Control-Allow-Methods"]), name
    node_answer, gateway_answer = answers["node"], answers["gateway"]
    for header in ("Access-Control-Allow-Headers", "Access-Control-Max-Age", "Access-Control-Allow-Origin"):
        assert node_answer.headers[header] == gateway_answer.headers[header], header


def test_both_refuse_the_same_origin(node: NodeProcess, gateway: GatewayProcess) -> None:
    for name, url in urls(node, gateway.url).items():
        resp = preflight(url, "http://evil.test")
        assert resp.status_code == 403, name
        assert "Access-Control-Allow-Origin" not in resp.headers, name


def test_actual_answers_expose_the_same_headers(node: NodeProcess, gateway: GatewayProcess) -> None:
    for name, url in urls(node, gateway.url).items():
        resp = requests.post(url, data=EMPTY_REQUEST, headers={**GRPC_WEB, "Origin": ORIGIN}, timeout=10)
        assert resp.status_code == 200, name
        assert resp.headers["Access-Control-Allow-Origin"] == ORIGIN, name
        exposed = listed(resp.headers["Access-Control-Expose-Headers"])
        assert exposed[: len(EXPOSED_RESPONSE_HEADERS)] == list(EXPOSED_RESPONSE_HEADERS), name
