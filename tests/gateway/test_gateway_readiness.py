"""Gateway readiness and balancing over several nodes, over real processes.

A gateway is ready when SOME node it knows serves, not when its first node does: each test puts the node that
does not serve (a replica following an upstream that is gone: live, NOT_SERVING; or an address with nothing
listening) FIRST in `--node-addr`, so a "first node decides" rule fails them. Reads keep flowing to the node
that serves. A `dns:///` entry is accepted and resolved (a local name resolves to one port only, so balancing
over a resolved name is left to gRPC's round_robin; the multi-address list is what is driven here).
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from gateway.upstream.pool import Upstream, resolve
from tests.fixtures.gwproc import GatewayProcess
from tests.fixtures.nodeproc import NodeProcess
from tests.fixtures.procs import free_port


@pytest.fixture(scope="module")
def nodes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[NodeProcess, NodeProcess]]:
    """(serving, not serving): a devnet node, and a replica of a stopped store following a dead upstream."""
    root = Path(tmp_path_factory.mktemp("gw-ready"))
    seed = NodeProcess(root / "seed", "--web-addr", "").start()
    assert seed.stop() == 0
    shutil.copytree(root / "seed", root / "replica")
    replica = NodeProcess(root / "replica", "--web-addr", "", "--follow", f"127.0.0.1:{free_port()}").start()
    serving = NodeProcess(root / "serving", "--web-addr", "").start()
    try:
        yield serving, replica
    finally:
        replica.stop()
        serving.stop()


def dead_address() -> str:
    return f"127.0.0.1:{free_port()}"


def health(gw: GatewayProcess) -> requests.Response:
    return requests.get(gw.url + "/v1/health", timeout=30)


def test_ready_when_a_later_node_serves_and_the_first_is_not_serving(nodes: tuple[NodeProcess, NodeProcess]) -> None:
    serving, replica = nodes
    gw = GatewayProcess(replica.grpc_target, serving.grpc_target).start()
    try:
        resp = health(gw)
        assert resp.status_code == 200, resp.text
        assert resp.json()["ready"] is True
    finally:
        gw.stop()


def test_a_stopped_node_leaves_the_gateway_ready_and_reads_go_to_the_other(
    nodes: tuple[NodeProcess, NodeProcess], tmp_path: Path
) -> None:
    serving, _ = nodes
    doomed = NodeProcess(tmp_path / "doomed", "--web-addr", "").start()
    gw = GatewayProcess(doomed.grpc_target, serving.grpc_target).start()
    try:
        assert health(gw).status_code == 200
        assert doomed.stop() == 0
        assert health(gw).status_code == 200
        for _ in range(6):  # round robin lands on the stopped node every other call: retried on the other
            status = requests.get(gw.url + "/v1/node/status", timeout=30)
            assert status.status_code == 200, status.text
    finally:
        gw.stop()
        doomed.stop()


def test_not_ready_when_no_node_serves(nodes: tuple[NodeProcess, NodeProcess]) -> None:
    _, replica = nodes
    gw = GatewayProcess(dead_address(), replica.grpc_target).start()
    try:
        resp = health(gw)
        assert resp.status_code == 503, resp.text
        assert resp.json()["live"] is True and resp.json()["ready"] is False  # the replica's own answer
    finally:
        gw.stop()


def test_not_ready_when_every_node_is_down() -> None:
    gw = GatewayProcess(dead_address(), dead_address(), args=("--request-timeout", "2")).start()
    try:
        resp = health(gw)
        assert resp.status_code == 503, resp.text
        assert "ready" not in resp.json()  # the error body: no node answered
    finally:
        gw.stop()


async def resolved(target: str) -> list[str]:
    """The node addresses one --node-addr entry stands for."""
    upstream = Upstream(target)
    try:
        return [dial.address for dial in await resolve(upstream)]
    finally:
        await upstream.channel.close(grace=None)


def test_a_dns_name_is_accepted_and_probed_on_each_resolved_address(nodes: tuple[NodeProcess, NodeProcess]) -> None:
    serving, _ = nodes
    port = serving.grpc_target.rsplit(":", 1)[1]
    assert "127.0.0.1:" + port in asyncio.run(resolved(f"dns:///localhost:{port}"))
    assert asyncio.run(resolved(serving.grpc_target)) == [serving.grpc_target]  # a plain entry is itself
    gw = GatewayProcess(f"dns:///localhost:{port}").start()
    try:
        assert health(gw).status_code == 200
        status = requests.get(gw.url + "/v1/node/status", timeout=30)
        assert status.status_code == 200, status.text
    finally:
        gw.stop()
