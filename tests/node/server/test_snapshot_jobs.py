"""Snapshot jobs against a real node: a job outlives the deadline of the call that started it, one job runs
at a time, a kill -9 in the middle of a copy leaves no untracked directory, failures are reported.

The node's test hook CHAIN_TEST_SNAPSHOT_HOLD names a file: while it exists, a copy waits after copying the
store and before it is published, which stands for a store too large to copy within a deadline.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import grpc
import pytest

from chain.v1 import admin_service_pb2 as pb
from chain.v1 import admin_service_pb2_grpc, rpc_pb2
from node.sdk.rpc import reason_of
from node.server.snapshots import SnapshotManager
from node.server.snapshots.jobs import SnapshotJobs
from tests.fixtures.nodeproc import NodeProcess

HOLD_ENV = "CHAIN_TEST_SNAPSHOT_HOLD"


def admin(node: NodeProcess) -> admin_service_pb2_grpc.AdminServiceStub:
    return admin_service_pb2_grpc.AdminServiceStub(grpc.insecure_channel(node.admin_target))


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.glob(".*")) if directory.exists() else []


def wait_for(check, timeout: float = 30.0, what: str = ""):
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def finished(stub: admin_service_pb2_grpc.AdminServiceStub, job_id: str) -> pb.SnapshotJob:
    def done() -> pb.SnapshotJob | None:
        job = stub.GetSnapshotJob(pb.GetSnapshotJobRequest(id=job_id)).job
        return job if job.state != pb.SNAPSHOT_JOB_STATE_RUNNING else None

    result: pb.SnapshotJob = wait_for(done, what=f"job {job_id} to finish")
    return result


def test_a_job_outlives_a_short_deadline_and_one_runs_at_a_time(tmp_path):
    hold = tmp_path / "hold"
    hold.touch()
    node = NodeProcess(tmp_path / "data", env={HOLD_ENV: str(hold)}).start()
    snapshots = node.data_dir / "snapshots"
    try:
        stub = admin(node)
        # The old synchronous call with a 1 s deadline: the call ends, the copy does not.
        with pytest.raises(grpc.RpcError) as err:
            stub.CreateSnapshot(rpc_pb2.CreateSnapshotRequest(), timeout=1.0)
        assert err.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        (running,) = stub.ListSnapshotJobs(pb.ListSnapshotJobsRequest()).jobs
        assert running.state == pb.SNAPSHOT_JOB_STATE_RUNNING and running.finished_at == 0
        assert running.started_at > 0 and not running.HasField("snapshot")

        again = stub.StartSnapshot(pb.StartSnapshotRequest(), timeout=1.0)
        assert not again.started and again.job.id == running.id  # one job at a time
        wait_for(lambda: [n for n in leftovers(snapshots) if n.startswith(".tmp-")], what="the copy in progress")
        assert stub.ListSnapshots(rpc_pb2.ListSnapshotsRequest()).snapshots == []

        hold.unlink()  # the "slow copy" finishes
        done = finished(stub, running.id)
        assert done.state == pb.SNAPSHOT_JOB_STATE_SUCCEEDED, done
        assert done.finished_at >= done.started_at and done.error == ""
        listed = stub.ListSnapshots(rpc_pb2.ListSnapshotsRequest()).snapshots
        assert [s.name for s in listed] == [done.snapshot.name]
        assert (snapshots / done.snapshot.name / "data.mdb").is_file()
        assert leftovers(snapshots) == []

        # A new start after it finished is a new job; the old synchronous call still answers a snapshot.
        fresh = stub.StartSnapshot(pb.StartSnapshotRequest(), timeout=5.0)
        assert fresh.started and fresh.job.id != running.id
        assert finished(stub, fresh.job.id).state == pb.SNAPSHOT_JOB_STATE_SUCCEEDED
        created = stub.CreateSnapshot(rpc_pb2.CreateSnapshotRequest(), timeout=30.0).snapshot
        assert created.name in {s.name for s in stub.ListSnapshots(rpc_pb2.ListSnapshotsRequest()).snapshots}

        with pytest.raises(grpc.RpcError) as unknown:
            stub.GetSnapshotJob(pb.GetSnapshotJobRequest(id="no-such-job"), timeout=5.0)
        assert unknown.value.code() == grpc.StatusCode.NOT_FOUND
        assert reason_of(unknown.value) == "NOT_FOUND"
    finally:
        hold.unlink(missing_ok=True)
        node.stop()


def test_kill_9_mid_copy_leaves_no_untracked_directory(tmp_path):
    hold = tmp_path / "hold"
    hold.touch()
    # No verify workers: a SIGKILL would leave the worker processes of the killed node behind.
    node = NodeProcess(tmp_path / "data", "--verify-workers", "0", env={HOLD_ENV: str(hold)}).start()
    snapshots = node.data_dir / "snapshots"
    try:
        job = admin(node).StartSnapshot(pb.StartSnapshotRequest(), timeout=5.0).job
        wait_for(lambda: [n for n in leftovers(snapshots) if n.startswith(".tmp-")], what="the copy in progress")
        node.signal(signal.SIGKILL)
        node.stop()
        assert leftovers(snapshots)  # what the killed copy left

        hold.unlink()
        node = NodeProcess(tmp_path / "data").start()
        assert leftovers(snapshots) == []  # removed at start-up
        stub = admin(node)
        assert stub.ListSnapshots(rpc_pb2.ListSnapshotsRequest()).snapshots == []
        # The job died with the process that ran it: unknown to the new one.
        with pytest.raises(grpc.RpcError) as err:
            stub.GetSnapshotJob(pb.GetSnapshotJobRequest(id=job.id), timeout=5.0)
        assert err.value.code() == grpc.StatusCode.NOT_FOUND
        again = stub.StartSnapshot(pb.StartSnapshotRequest(), timeout=5.0)
        assert again.started and again.job.id != job.id
        assert finished(stub, again.job.id).state == pb.SNAPSHOT_JOB_STATE_SUCCEEDED
    finally:
        hold.unlink(missing_ok=True)
        node.stop()


def test_a_failing_copy_is_a_failed_job_with_a_reason(tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the snapshot directory's parent should be\n")
    node = NodeProcess(tmp_path / "data", "--snapshot-dir", str(blocker / "snapshots")).start()
    try:
        stub = admin(node)
        job = stub.StartSnapshot(pb.StartSnapshotRequest(), timeout=5.0).job
        failed = finished(stub, job.id)
        assert failed.state == pb.SNAPSHOT_JOB_STATE_FAILED
        assert failed.error_reason == "STORAGE_FAILED" and failed.error
        assert not failed.HasField("snapshot") and failed.finished_at >= failed.started_at
        with pytest.raises(grpc.RpcError) as err:  # the synchronous call reports it as an error too
            stub.CreateSnapshot(rpc_pb2.CreateSnapshotRequest(), timeout=30.0)
        assert err.value.code() != grpc.StatusCode.OK
    finally:
        node.stop()


def test_the_jobs_table_is_bounded(tmp_path):
    # A manager without a chain refuses every copy: each job fails at once, and only `keep` of them stay.
    jobs = SnapshotJobs(SnapshotManager(None, tmp_path / "snapshots"), keep=3)
    ids = []
    for _ in range(6):
        job, started = jobs.start()
        assert started
        job.done.wait(30)
        ids.append(job.id)
    listed = [j.id for j in jobs.list()]
    assert listed == list(reversed(ids[-3:]))
    assert all(j.state == pb.SNAPSHOT_JOB_STATE_FAILED and j.error_reason == "INTERNAL" for j in jobs.list())
    jobs.close()
