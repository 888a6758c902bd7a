"""AdminService: snapshots (served on its own listener, localhost by default, optional token).

Snapshots are jobs (node/server/snapshots/jobs.py): StartSnapshot answers at once, GetSnapshotJob polls.
CreateSnapshot, the older call, is StartSnapshot plus waiting for that job: its deadline ends the call, never
the copy, which finishes and is published (or fails and leaves nothing) on its own.
"""

from __future__ import annotations

import asyncio
import re
import shutil

from grpc.aio import ServicerContext

from chain.v1 import admin_service_pb2, admin_service_pb2_grpc, node_info_pb2, rpc_pb2
from node.errors import InvalidArgument, NotFound
from node.server.snapshots import INFO, SnapshotManager, read_info
from node.server.snapshots.jobs import SnapshotJobs

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
    snapshots.changed()
    return info


class AdminServicer(admin_service_pb2_grpc.AdminServiceServicer):
    def __init__(self, snapshots: SnapshotManager, jobs: SnapshotJobs) -> None:
        self.snapshots = snapshots
        self.jobs = jobs

    async def CreateSnapshot(
        self,
        request: rpc_pb2.CreateSnapshotRequest,
        context: ServicerContext[rpc_pb2.CreateSnapshotRequest, rpc_pb2.CreateSnapshotResponse],
    ) -> rpc_pb2.CreateSnapshotResponse:
        job, _ = self.jobs.start()
        await asyncio.to_thread(job.done.wait)
        if job.error is not None:
            raise job.error  # the typed error of the copy, mapped by rpc/status.py
        assert job.snapshot is not None
        return rpc_pb2.CreateSnapshotResponse(snapshot=job.snapshot)

    async def StartSnapshot(
        self,
        request: admin_service_pb2.StartSnapshotRequest,
        context: ServicerContext[admin_service_pb2.StartSnapshotRequest, admin_service_pb2.StartSnapshotResponse],
    ) -> admin_service_pb2.StartSnapshotResponse:
        job, started = self.jobs.start()
        return admin_service_pb2.StartSnapshotResponse(job=self.jobs.get(job.id), started=started)

    async def GetSnapshotJob(
        self,
        request: admin_service_pb2.GetSnapshotJobRequest,
        context: ServicerContext[admin_service_pb2.GetSnapshotJobRequest, admin_service_pb2.GetSnapshotJobResponse],
    ) -> admin_service_pb2.GetSnapshotJobResponse:
        return admin_service_pb2.GetSnapshotJobResponse(job=self.jobs.get(request.id))

    async def ListSnapshotJobs(
        self,
        request: admin_service_pb2.ListSnapshotJobsRequest,
        context: ServicerContext[admin_service_pb2.ListSnapshotJobsRequest, admin_service_pb2.ListSnapshotJobsResponse],
    ) -> admin_service_pb2.ListSnapshotJobsResponse:
        return admin_service_pb2.ListSnapshotJobsResponse(jobs=self.jobs.list())

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
