"""AdminService.DeleteSnapshot against a real node: removal, typed errors, and what is left untouched."""

import grpc
import pytest

from chain.v1 import rpc_pb2
from node.sdk.rpc import reason_of
from tests.fixtures.nodeproc import NodeProcess


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    proc = NodeProcess(tmp_path_factory.mktemp("admin") / "data", "--web-addr", "").start()
    yield proc
    proc.stop()


def test_delete_snapshot_removes_exactly_that_one(node):
    c = node.client()
    assert c.admin is not None
    # Back to back: the same block in the same second gets suffixed names, never an error.
    first, second, third = (c.admin.CreateSnapshot(rpc_pb2.CreateSnapshotRequest()).snapshot for _ in range(3))
    assert len({first.name, second.name, third.name}) == 3
    c.admin.DeleteSnapshot(rpc_pb2.DeleteSnapshotRequest(name=third.name))  # suffixed names are deletable too

    removed = c.admin.DeleteSnapshot(rpc_pb2.DeleteSnapshotRequest(name=first.name)).snapshot
    assert removed == first
    left = c.admin.ListSnapshots(rpc_pb2.ListSnapshotsRequest()).snapshots
    assert [s.name for s in left] == [second.name]
    assert not (node.data_dir / "snapshots" / first.name).exists()
    assert (node.data_dir / "snapshots" / second.name / "data.mdb").exists()

    with pytest.raises(grpc.RpcError) as again:
        c.admin.DeleteSnapshot(rpc_pb2.DeleteSnapshotRequest(name=first.name))
    assert again.value.code() == grpc.StatusCode.NOT_FOUND
    assert reason_of(again.value) == "NOT_FOUND"


@pytest.mark.parametrize("name", ["", "..", "../data", "snap-1-2", "snap-000000000001-1/../../x", "data.mdb"])
def test_delete_snapshot_refuses_names_that_are_not_snapshot_names(node, name):
    c = node.client()
    assert c.admin is not None
    with pytest.raises(grpc.RpcError) as err:
        c.admin.DeleteSnapshot(rpc_pb2.DeleteSnapshotRequest(name=name))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert reason_of(err.value) == "INVALID_ARGUMENT"
    assert (node.data_dir / "data.mdb").exists()
