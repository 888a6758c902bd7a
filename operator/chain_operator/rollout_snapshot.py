"""A snapshot before a rollout releases its first pod, recorded in `status.upgrade.snapshot`.

A new image may rewrite the store in a format the old one cannot read back (node/storage/identity.py: the node
refuses a store whose format it does not read), and nothing in the pod template says whether it will: the node
reports the format of the store it has, not the one the next image writes. So every rollout takes one, once
the gates have passed and before the first release: a job on a member (snapshot_jobs.start, as a scheduled
snapshot), followed until it ends; the ChainSnapshot it records is what a rollback restores
(docs/deploy.md "Upgrades"). A job that fails or cannot start holds the rollout (nothing has been released
yet), saying why; the next step starts another. `--rollout-snapshot off` turns it off.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from chain_operator import snapshot_jobs
from chain_operator.conditions import ConditionReason
from chain_operator.config import OperatorConfig
from chain_operator.errors import OperatorError
from chain_operator.kube import KubeApi
from chain_operator.snapshot_jobs import JobRecord, Outcome
from chain_operator.spec import Network


@dataclass(frozen=True)
class RolloutSnapshot:
    """`status.upgrade.snapshot`: the job in flight, then the snapshot taken (its ChainSnapshot and block)."""

    job: JobRecord | None = None
    name: str = ""
    block: int = 0
    pod: str = ""
    error: str = ""

    @property
    def taken(self) -> bool:
        return bool(self.name)

    @classmethod
    def from_status(cls, raw: Mapping[str, Any] | None) -> RolloutSnapshot:
        raw = raw or {}
        try:
            block = int(raw.get("block") or 0)
        except (TypeError, ValueError):
            block = 0
        return cls(
            job=JobRecord.from_status(raw.get("job")),
            name=str(raw.get("name") or ""),
            block=block,
            pod=str(raw.get("pod") or ""),
            error=str(raw.get("error") or ""),
        )

    def to_status(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "block": self.block, "pod": self.pod, "error": self.error}
        out["job"] = self.job.as_status() if self.job is not None else None
        return out


@dataclass(frozen=True)
class Taking:
    """Where the snapshot stands after one move: the record to store, and why the rollout still waits
    ("" once it is taken)."""

    record: RolloutSnapshot
    waiting: str = ""
    reason: ConditionReason = ConditionReason.SNAPSHOT_BEFORE_ROLLOUT


async def advance(kube: KubeApi, config: OperatorConfig, net: Network, record: RolloutSnapshot) -> Taking:
    """Start the job, or follow the one in flight; once it succeeded the record names the snapshot."""
    if record.taken:
        return Taking(record)
    job = record.job
    if job is None or job.state is not snapshot_jobs.JobState.RUNNING:
        try:
            job = await snapshot_jobs.start(kube, config, net)
        except OperatorError as exc:
            failed = RolloutSnapshot(error=f"{exc.reason}: {exc}")
            return Taking(failed, f"the snapshot before the rollout could not start: {exc}", exc.reason)
    step = await snapshot_jobs.follow(kube, config, net, job)
    if step.outcome is Outcome.SUCCEEDED and step.created is not None:
        spec = step.created["spec"]
        return Taking(
            RolloutSnapshot(step.job, step.created["metadata"]["name"], int(spec["blockNumber"]), str(spec["pod"]))
        )
    if step.outcome is Outcome.FAILED:
        reason = step.reason or ConditionReason.SNAPSHOT_JOB_FAILED
        failed = RolloutSnapshot(step.job, error=step.message)
        return Taking(failed, f"the snapshot before the rollout failed: {step.message}", reason)
    return Taking(RolloutSnapshot(step.job), f"taking a snapshot on {job.pod} before the first release")
