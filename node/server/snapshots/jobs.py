"""Snapshot jobs: a snapshot runs in its own thread, apart from any RPC, and is polled by id.

`StartSnapshot` answers at once with a job; the copy goes on to completion whatever happens to the call
that started it (its deadline, a cancelled client). One job runs at a time: starting while one runs answers
the running job. Finished jobs stay in a table of at most `keep` entries (the oldest finished one goes
first), in memory only: after the node restarts, a job id of the previous run is unknown (NOT_FOUND), and
the copy it was making was removed at start-up (`SnapshotManager.discard_leftovers`).
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from dataclasses import dataclass, field

from chain.v1 import admin_service_pb2 as pb
from chain.v1 import node_info_pb2
from node.errors import MessageRejected, NotFound, Reason, StorageFailed
from node.server.snapshots.manager import SnapshotManager

log = logging.getLogger("chain.snapshots")
DEFAULT_KEEP = 32


@dataclass
class Job:
    """One job; fields change under SnapshotJobs' lock only, `done` is set once it finished."""

    id: str
    started_at: int
    state: pb.SnapshotJobState.ValueType = pb.SNAPSHOT_JOB_STATE_RUNNING
    snapshot: node_info_pb2.SnapshotInfo | None = None
    error: BaseException | None = None
    finished_at: int = 0
    done: threading.Event = field(default_factory=threading.Event)


def reason_of(exc: BaseException) -> str:
    """The reason code a failed job reports (the node's `Reason` vocabulary)."""
    if isinstance(exc, MessageRejected):
        return exc.reason.value
    if isinstance(exc, StorageFailed | OSError):
        return Reason.STORAGE_FAILED.value
    return Reason.INTERNAL.value


def to_proto(job: Job) -> pb.SnapshotJob:
    out = pb.SnapshotJob(id=job.id, state=job.state, started_at=job.started_at, finished_at=job.finished_at)
    if job.snapshot is not None:
        out.snapshot.CopyFrom(job.snapshot)
    if job.error is not None:
        out.error_reason = reason_of(job.error)
        out.error = str(job.error) or type(job.error).__name__
    return out


class SnapshotJobs:
    def __init__(self, manager: SnapshotManager, *, keep: int = DEFAULT_KEEP) -> None:
        self.manager = manager
        self.keep = keep
        # ids are unique across restarts of the node: a job id of an earlier run is never reused
        self._run = secrets.token_hex(4)
        self._count = 0
        self._lock = threading.Lock()
        self._jobs: dict[str, Job] = {}  # in start order
        self._thread: threading.Thread | None = None

    def start(self) -> tuple[Job, bool]:
        """The running job (started False), or a new one (started True)."""
        with self._lock:
            running = next((j for j in self._jobs.values() if not j.done.is_set()), None)
            if running is not None:
                return running, False
            self._count += 1
            job = Job(id=f"{self._run}-{self._count}", started_at=int(time.time()))
            self._jobs[job.id] = job
            self._trim()
            # Not a daemon: the process waits for a copy in progress at exit (close() below) rather than
            # closing the store under it; a kill leaves a `.tmp-*` copy that the next start removes.
            self._thread = threading.Thread(target=self._run_job, args=(job,), name=f"snapshot-{job.id}")
            self._thread.start()
        log.info("snapshot job %s started", job.id)
        return job, True

    def _trim(self) -> None:
        finished = [j.id for j in self._jobs.values() if j.done.is_set()]
        for job_id in finished[: max(0, len(self._jobs) - self.keep)]:
            del self._jobs[job_id]

    def _run_job(self, job: Job) -> None:
        snapshot: node_info_pb2.SnapshotInfo | None = None
        error: BaseException | None = None
        try:
            snapshot = self.manager.create()
        except Exception as exc:  # recorded on the job: the poller learns it
            log.exception("snapshot job %s failed", job.id)
            error = exc
        with self._lock:
            job.snapshot, job.error, job.finished_at = snapshot, error, int(time.time())
            job.state = pb.SNAPSHOT_JOB_STATE_SUCCEEDED if error is None else pb.SNAPSHOT_JOB_STATE_FAILED
            job.done.set()
        if snapshot is not None:
            log.info("snapshot job %s took %s at block %d", job.id, snapshot.name, snapshot.block_number)

    def get(self, job_id: str) -> pb.SnapshotJob:
        with self._lock:
            job = self._jobs.get(job_id)
            if job is None:
                raise NotFound("snapshot job", job_id)
            return to_proto(job)

    def job(self, job_id: str) -> Job:
        with self._lock:
            job = self._jobs.get(job_id)
        if job is None:
            raise NotFound("snapshot job", job_id)
        return job

    def list(self) -> list[pb.SnapshotJob]:
        with self._lock:
            return [to_proto(j) for j in reversed(self._jobs.values())]

    def close(self) -> None:
        """Wait for the running copy to end (called before the store closes)."""
        thread = self._thread
        if thread is not None and thread.is_alive():
            log.info("waiting for the snapshot in progress to finish before closing the store")
            thread.join()
