"""Rotating the admin token (docs/operations.md "Rotate the admin token"): the node reads
CHAIN_NODE_ADMIN_TOKEN (the chart sets it from the Secret) once, at start. A restart on the same data dir with
the new token refuses the old one and accepts the new one; the store is untouched."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest

from chain.v1 import rpc_pb2
from tests.fixtures.nodeproc import NodeProcess
from tests.fixtures.replicaset import status


def list_snapshots(node: NodeProcess, token: str) -> list[str]:
    with node.client(admin_token=token) as c:
        assert c.admin is not None
        answer = c.admin.ListSnapshots(rpc_pb2.ListSnapshotsRequest(), metadata=c.admin_metadata, timeout=10)
        return [s.name for s in answer.snapshots]


def refused(node: NodeProcess, token: str) -> None:
    with pytest.raises(grpc.RpcError) as caught:
        list_snapshots(node, token)
    assert isinstance(caught.value, grpc.Call) and caught.value.code() == grpc.StatusCode.UNAUTHENTICATED


def test_a_restart_with_the_new_token_refuses_the_old_one(tmp_path: Path) -> None:
    args = ("--web-addr", "", "--verify-workers", "0")
    node = NodeProcess(tmp_path / "data", *args, env={"CHAIN_NODE_ADMIN_TOKEN": "old-token"}).start()
    try:
        with node.client(admin_token="old-token") as c:
            assert c.admin is not None
            c.admin.CreateSnapshot(rpc_pb2.CreateSnapshotRequest(), metadata=c.admin_metadata, timeout=30)
        taken = list_snapshots(node, "old-token")
        refused(node, "new-token")
        height = status(node).block_height
    finally:
        assert node.stop() == 0
    node = NodeProcess(tmp_path / "data", *args, env={"CHAIN_NODE_ADMIN_TOKEN": "new-token"}).start()
    try:
        refused(node, "old-token")
        assert list_snapshots(node, "new-token") == taken
        assert status(node).block_height >= height
    finally:
        node.stop()
