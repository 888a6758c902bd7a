"""Shared fixtures for gateway tests: a real chain-node, and a gateway in front of it.

    def test_sync(node, gateway):                       # the real `chain-gateway` subprocess
        requests.get(gateway.url + "/v1/node/status")

    async def test_async(node, gateway_client):          # the app in-process (aiohttp TestClient, 127.0.0.1)
        resp = await gateway_client.get("/v1/node/status")

    async def test_config(node, make_gateway_client):     # in-process with other settings
        client = await make_gateway_client(sse_heartbeat=0.5)

- `node` (module scope): a `NodeProcess` (tests/fixtures/nodeproc.py) on loopback ports in a temporary
  directory: a devnet cutting blocks every 50 ms; `node.client()` is a gRPC client, `node.authority()`
  the storage authority that funds accounts (see tests/fixtures/actors.py::new_account).
- `gateway` (module scope): a `GatewayProcess` (tests/fixtures/gwproc.py) for `node`, with the gRPC-web
  passthrough (`--node-web-url`) and CORS for `ORIGIN`.
- `gateway_config(node, **overrides)`: the `GatewayConfig` the in-process fixtures use.
- `make_gateway_client(**overrides)` / `gateway_client`: `build_app(config)` served in-process.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from gateway.app import build_app
from gateway.config import GatewayConfig
from tests.fixtures.gwproc import GatewayProcess
from tests.fixtures.nodeproc import NodeProcess

ORIGIN = "http://app.test"

MakeClient = Callable[..., Awaitable[TestClient[Any, Any]]]


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    proc = NodeProcess(Path(tmp_path_factory.mktemp("gw-node")) / "node").start()
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture(scope="module")
def gateway(node: NodeProcess) -> Iterator[GatewayProcess]:
    proc = GatewayProcess(node.grpc_target, node_web_url=node.web_url, cors_origins=(ORIGIN,)).start()
    try:
        yield proc
    finally:
        proc.stop()


def gateway_config(node: NodeProcess, **overrides: Any) -> GatewayConfig:
    config = GatewayConfig(
        http_addr="127.0.0.1:0",
        node_addrs=(node.grpc_target,),
        node_internal_addrs=(node.internal_target,),  # reads batched on the node's internal listener
        node_web_url=node.web_url,
        cors_origins=(ORIGIN,),
        request_timeout=10.0,
    )
    return replace(config, **overrides)


@pytest.fixture
def make_gateway_client(node: NodeProcess, aiohttp_client: Any) -> MakeClient:
    async def make(**overrides: Any) -> TestClient[Any, Any]:
        client: TestClient[Any, Any] = await aiohttp_client(build_app(gateway_config(node, **overrides)))
        return client

    return make


@pytest.fixture
async def gateway_client(make_gateway_client: MakeClient) -> TestClient[Any, Any]:
    return await make_gateway_client()
