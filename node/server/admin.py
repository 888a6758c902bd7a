"""AdminService: snapshots (served on its own listener, localhost by default, optional token)."""

from __future__ import annotations

import asyncio
from typing import Any

from chain.v1 import admin_service_pb2_grpc, rpc_pb2
from node.server.snapshots import SnapshotManager


class AdminServicer(admin_service_pb2_grpc.AdminServiceServicer):
    def __init__(self, snapshots: SnapshotManager) -> None:
        self.snapshots = snapshots

    async def CreateSnapshot(
        self, request: rpc_pb2.CreateSnapshotRequest, context: Any
    ) -> rpc_pb2.CreateSnapshotResponse:
        info = await asyncio.to_thread(self.snapshots.create)
        return rpc_pb2.CreateSnapshotResponse(snapshot=info)

    async def ListSnapshots(self, request: rpc_pb2.ListSnapshotsRequest, context: Any) -> rpc_pb2.ListSnapshotsResponse:
        return rpc_pb2.ListSnapshotsResponse(snapshots=self.snapshots.list())
