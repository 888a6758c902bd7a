"""A scheduled snapshot as a job on a node, followed across timer ticks.

When a snapshot is due, the operator starts a job on a ready pod that answers (AdminService StartSnapshot
answers at once), rotating over the pods: the first ready one after the pod of the last job, in ordinal
order, so the snapshots (and the members that serve state sync from them) spread over the members instead of
piling onto one volume, and records it in `status.snapshots.job` (id, pod, state, start time). Every
tick after that polls the job (GetSnapshotJob) until it ends: SUCCEEDED records the ChainSnapshot and the
schedule advances; FAILED, a job the node no longer knows (it restarted: a node keeps its jobs in memory and
removes an interrupted copy at start-up) or a job running past `--snapshot-job-timeout` count as one failure
and the next tick starts a new one. The job lives in the status, so an operator restarted mid-job polls the
same id again instead of starting another copy. A pod that cannot be reached while its job runs is asked
again on the next tick (not a failure, until the timeout).
"""

from __future__ import annotations

import datetime
import logging
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

from chain.v1 import admin_service_pb2 as admin_pb
from chain_operator.conditions import ConditionReason, now_iso
from chain_operator.config import OperatorConfig
from chain_operator.errors import KubeNotFound, NodeUnreachable, Retry
from chain_operator.kube import KubeApi, Obj, pod_path
from chain_operator.nodes import NodeClient, pod_view
from chain_operator.snapshots import is_due, pods, record
from chain_operator.spec import Network, parse_time

log = logging.getLogger("chain.operator.snapshots")


class JobState(StrEnum):
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"


@dataclass(frozen=True)
class JobRecord:
    """`status.snapshots.job`: the last job the operator started, as it last saw it."""

    id: str
    pod: str
    state: JobState
    started: str  # when the operator started (or adopted) it, ISO 8601 UTC
    snapshot: str = ""  # the snapshot's name once it succeeded
    error: str = ""  # why it failed

    @classmethod
    def from_status(cls, raw: Any) -> JobRecord | None:
        if not isinstance(raw, dict) or not raw.get("id") or not raw.get("pod"):
            return None
        try:
            state = JobState(raw.get("state", ""))
        except ValueError:
            return None
        return cls(
            id=str(raw["id"]),
            pod=str(raw["pod"]),
            state=state,
            started=str(raw.get("started", "")),
            snapshot=str(raw.get("snapshot", "")),
            error=str(raw.get("error", "")),
        )

    def as_status(self) -> dict[str, str]:
        return {
            "id": self.id,
            "pod": self.pod,
            "state": self.state.value,
            "started": self.started,
            "snapshot": self.snapshot,
            "error": self.error,
        }


class Outcome(StrEnum):
    IDLE = "Idle"  # nothing due, nothing running
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"


@dataclass(frozen=True)
class Step:
    outcome: Outcome
    job: JobRecord | None = None
    created: Obj | None = None  # the ChainSnapshot (SUCCEEDED)
    reason: ConditionReason | None = None  # why it failed (FAILED)
    message: str = ""


async def step(kube: KubeApi, config: OperatorConfig, net: Network, status: dict[str, Any]) -> Step:
    """One tick: follow the running job, or start one when a snapshot is due. A refused start raises (an
    OperatorError: no ready pod, every pod unreachable or refusing)."""
    job = JobRecord.from_status((status.get("snapshots") or {}).get("job"))
    if job is None or job.state is not JobState.RUNNING:
        if not is_due(net.spec, status, datetime.datetime.now(tz=datetime.UTC)):
            return Step(Outcome.IDLE)
        job = await start(kube, config, net, after=job.pod if job is not None else "")
    return await follow(kube, config, net, job)


def rotated(names: list[str], after: str) -> list[str]:
    """`names` (ordinal order) starting with the one after `after`, wrapping around; as they are without it."""
    if after not in names:
        return names
    i = names.index(after) + 1
    return names[i:] + names[:i]


async def start(kube: KubeApi, config: OperatorConfig, net: Network, *, after: str = "") -> JobRecord:
    """Start a job on the first ready pod after `after` (the last job's) that answers (or adopt the one it
    runs)."""
    ready = {p.name: p for p in await pods(kube, net) if p.ready and p.ip}
    order = rotated([net.spec.pod_name(i) for i in range(net.spec.replicas)], after)
    candidates = [ready[name] for name in order if name in ready]
    if not candidates:
        message = f"no ready node pod of {net.spec.statefulset}"
        raise Retry(message, reason=ConditionReason.NO_READY_NODE, delay=config.snapshot_tick)
    last_error: NodeUnreachable | None = None
    for pod in candidates:
        try:
            answer = await NodeClient(pod, config).start_snapshot()
        except NodeUnreachable as exc:
            log.warning("starting a snapshot on %s failed: %s", pod.name, exc)
            last_error = exc
            continue
        log.info("snapshot job %s on %s (%s)", answer.job.id, pod.name, "started" if answer.started else "adopted")
        return JobRecord(id=answer.job.id, pod=pod.name, state=JobState.RUNNING, started=now_iso())
    assert last_error is not None
    raise last_error


def _timed_out(config: OperatorConfig, job: JobRecord) -> bool:
    started = parse_time(job.started)
    if started is None:
        return False
    age = (datetime.datetime.now(tz=datetime.UTC) - started).total_seconds()
    return age > config.snapshot_job_timeout


def failed(job: JobRecord, reason: ConditionReason, message: str) -> Step:
    return Step(Outcome.FAILED, replace(job, state=JobState.FAILED, error=message), reason=reason, message=message)


async def follow(kube: KubeApi, config: OperatorConfig, net: Network, job: JobRecord) -> Step:
    """Ask the job's pod how its job is going."""
    try:
        pod = pod_view(await kube.get(pod_path(net.namespace, job.pod)), net.spec.container)
        if not pod.ip:
            raise NodeUnreachable(f"{job.pod} has no address")
        remote = await NodeClient(pod, config).snapshot_job(job.id)
    except (NodeUnreachable, KubeNotFound) as exc:
        if _timed_out(config, job):
            return failed(job, ConditionReason.SNAPSHOT_JOB_TIMEOUT, f"job {job.id} on {job.pod}: {exc}")
        return Step(Outcome.RUNNING, job, message=f"cannot ask {job.pod} about job {job.id} yet: {exc}")
    if remote is None:
        message = f"job {job.id} is unknown to {job.pod} (the node restarted and abandoned it)"
        return failed(job, ConditionReason.SNAPSHOT_JOB_LOST, message)
    if remote.state == admin_pb.SNAPSHOT_JOB_STATE_SUCCEEDED:
        created = await record(kube, net, job.pod, remote.snapshot)
        done = replace(job, state=JobState.SUCCEEDED, snapshot=remote.snapshot.name)
        return Step(Outcome.SUCCEEDED, done, created=created)
    if remote.state == admin_pb.SNAPSHOT_JOB_STATE_FAILED:
        message = f"job {job.id} on {job.pod} failed: {remote.error_reason}: {remote.error}"
        return failed(job, ConditionReason.SNAPSHOT_JOB_FAILED, message)
    if _timed_out(config, job):
        message = f"job {job.id} on {job.pod} still runs after {config.snapshot_job_timeout:.0f} s"
        return failed(job, ConditionReason.SNAPSHOT_JOB_TIMEOUT, message)
    return Step(Outcome.RUNNING, job)
