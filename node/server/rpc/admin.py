"""AdminService: snapshots (served on its own listener, localhost by default, optional token)."""

from __future__ import annotations

import asyncio
import re
import shutil

from grpc.aio import ServicerContext

from chain.v1 import admin_service_pb2_grpc, node_info_pb2, rpc_pb2
from node.errors import InvalidArgument, NotFound
from node.server.snapshots import INFO, SnapshotManager, read_info

# Names SnapshotManager.create gives: snap-<12-digit block>-<unix seconds>[-<n>] (n: the second snapshot of a
# block in the same second). Anything else (a path, "..") is refused before it touches the file system.
SNAPSHOT_NAME = re.compile(r"snap-[0-9]{12}-[0-9]{1,20}(-[0-9]{1,3})?")


def delete_snapshot(snapshots: SnapshotManager, name: str) -> node_info_pb2.SnapshotInfo:
    """Remove one snapshot directory; typed errors for a malformed or unknown name."""
    if not SNAPSHOT_NAME.fullmatch(name):
        raise InvalidArgument("name", f"not a snapshot name: {name!r}")
    directory = snapshots.directory / name
    if not (directory / INFO).is_file():
        raise NotFound("snapshot", name)
    info = read_info(directory)
    # Rename first so a crash halfway never leaves a half-deleted directory that still looks like a snapshot.
    doomed = directory.with_name(f".deleting-{name}")
    directory.rename(doomed)
    shutil.rmtree(doomed)
    return info


class AdminServicer(admin_service_pb2_grpc.AdminServiceServicer):
    def __init__(self, snapshots: SnapshotManager) -> None:
        self.snapshots = snapshots

    async def CreateSnapshot(
        self,
        request: rpc_pb2.CreateSnapshotRequest,
        context: ServicerContext[rpc_pb2.CreateSnapshotRequest, rpc_pb2.CreateSnapshotResponse],
    ) -> rpc_pb2.CreateSnapshotResponse:
        info = await asyncio.to_thread(self.snapshots.create)
        return rpc_pb2.CreateSnapshotResponse(snapshot=info)

    async def ListSnapshots(
        self,
        request: rpc_pb2.ListSnapshotsRequest,
        context: ServicerContext[rpc_pb2.ListSnapshotsRequest, rpc_pb2.ListSnapshotsResponse],
    ) -> rpc_pb2.ListSnapshotsResponse:
        return rpc_pb2.ListSnapshotsResponse(snapshots=self.snapshots.list())

    async def DeleteSnapshot(
        self,
        request: rpc_pb2.DeleteSnapshotRequest,
        context: ServicerContext[rpc_pb2.DeleteSnapshotRequest, rpc_pb2.DeleteSnapshotResponse],
    ) -> rpc_pb2.DeleteSnapshotResponse:
        info = await asyncio.to_thread(delete_snapshot, self.snapshots, request.name)
        return rpc_pb2.DeleteSnapshotResponse(snapshot=info)
