"""Disk full under a running node, on a real tmpfs holding its data dir.

Fill the file system, keep submitting: the node refuses with UNAVAILABLE `STORAGE_FAILED` and a
`retry-after-ms` hint, readiness turns NOT_SERVING, `chain_storage_failed` is 1 and a log line says why.
Free the space: it recovers by itself, and every message it answered "accepted" is committed.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import grpc

from chain.v1 import rpc_pb2
from node.sdk.rpc import reason_of
from tests.fixtures.actors import fresh
from tests.fixtures.disk import fill
from tests.fixtures.health import NOT_SERVING, SERVING, health_status
from tests.fixtures.nodeproc import NodeProcess
from tests.fixtures.scrape import scrape, value


def eventually(check: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def trailer(err: grpc.RpcError, key: str) -> str:
    assert isinstance(err, grpc.Call)
    return next((str(v) for k, v in (err.trailing_metadata() or ()) if k == key), "")


def test_disk_full_refuses_then_recovers_and_loses_nothing(tmpfs: Path) -> None:
    node = NodeProcess(tmpfs / "data", "--web-addr", "").start()
    try:
        client = node.client(timeout=10)
        before = [fresh() for _ in range(3)]
        client.commit(*before)
        assert health_status(node.grpc_target) == SERVING

        fill(tmpfs / "ballast")
        accepted: list[bytes] = []
        refusal: grpc.RpcError | None = None
        deadline = time.monotonic() + 60
        while refusal is None and time.monotonic() < deadline:
            try:
                accepted.append(client.submit(fresh()))
            except grpc.RpcError as err:
                refusal = err
        assert refusal is not None, "the node kept accepting on a full disk"
        assert isinstance(refusal, grpc.Call)
        assert refusal.code() == grpc.StatusCode.UNAVAILABLE and reason_of(refusal) == "STORAGE_FAILED"
        assert int(trailer(refusal, "retry-after-ms")) > 0
        assert eventually(lambda: health_status(node.grpc_target, "readiness") == NOT_SERVING, 10)
        assert health_status(node.grpc_target) == NOT_SERVING  # "" follows readiness
        assert health_status(node.grpc_target, "liveness") == SERVING  # a restart would not free the disk
        assert value(scrape(node.ready["metrics_port"]), "chain_storage_failed") == 1
        assert any("STORAGE FAILED" in line for line in node.stderr_lines)
        height_while_full = client.stub.GetNodeStatus(rpc_pb2.GetNodeStatusRequest()).status.block_height

        (tmpfs / "ballast").unlink()
        assert eventually(lambda: health_status(node.grpc_target, "readiness") == SERVING, 60), (
            "no recovery after space returned"
        )
        for message_hash in accepted:  # every message answered "accepted" is committed, none dropped
            client.wait_committed(message_hash, timeout=30)
        for msg in before:
            client.wait_committed(bytes(msg.hash), timeout=5)
        client.commit(fresh())
        status = client.stub.GetNodeStatus(rpc_pb2.GetNodeStatusRequest()).status
        assert status.block_height > height_while_full
        assert value(scrape(node.ready["metrics_port"]), "chain_storage_failed") == 0
        assert any("storage recovered" in line for line in node.stderr_lines)
        client.close()
    finally:
        node.stop()
