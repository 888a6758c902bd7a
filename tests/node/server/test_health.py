"""Liveness and readiness under distinct grpc.health.v1 names, over real processes.

`liveness`: the process and its event loop answer. `readiness` (and `""`, `chain.v1.ChainService`): serving,
caught up, storage healthy. A member that cannot catch up is not ready but stays live, so Kubernetes takes
it out of the Services without restarting it in a loop. (Storage: tests/node/server/test_disk_full.py.)
"""

from __future__ import annotations

import shutil
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from chain.v1 import rpc_pb2
from tests.fixtures.nodeproc import NodeProcess
from tests.fixtures.procs import free_port

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


def statuses(target: str) -> dict[str, int]:
    with grpc.insecure_channel(target) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        names = ("", "chain.v1.ChainService", "liveness", "readiness")
        return {n: int(stub.Check(health_pb2.HealthCheckRequest(service=n), timeout=5).status) for n in names}


def test_a_serving_node_is_live_and_ready(tmp_path: Path) -> None:
    node = NodeProcess(tmp_path / "data", "--web-addr", "").start()
    try:
        assert statuses(node.grpc_target) == {
            "": SERVING,
            "chain.v1.ChainService": SERVING,
            "liveness": SERVING,
            "readiness": SERVING,
        }
        with node.client() as client:
            health = client.stub.GetHealth(rpc_pb2.GetHealthRequest(), timeout=5)
        assert health.live and health.ready
    finally:
        node.stop()


def test_a_member_that_cannot_catch_up_stays_live_but_not_ready(tmp_path: Path) -> None:
    first = NodeProcess(tmp_path / "a", "--web-addr", "").start()
    assert first.stop() == 0
    shutil.copytree(tmp_path / "a", tmp_path / "b")  # an existing store: a replica of an upstream that is gone
    replica = NodeProcess(tmp_path / "b", "--web-addr", "", "--follow", f"127.0.0.1:{free_port()}").start()
    try:
        got = statuses(replica.grpc_target)
        assert got["liveness"] == SERVING
        assert got["readiness"] == got[""] == got["chain.v1.ChainService"] == NOT_SERVING
        with replica.client() as client:
            health = client.stub.GetHealth(rpc_pb2.GetHealthRequest(), timeout=5)
        assert health.live and not health.ready
    finally:
        replica.stop()
