"""Status conditions the Kubernetes way: one entry per type, `lastTransitionTime` moves only when the
status does, `reason` is CamelCase, `observedGeneration` says which spec the condition is about.

Types on a ChainNetwork:
- `Ready`: every node pod runs the desired version and is serving.
- `Upgrading`: True while a rolling upgrade runs; False with reason `Completed` or `UpgradeFailed`.
- `SnapshotsReady`: False with a reason when the last scheduled snapshot failed (start refused, job failed,
  lost or timed out); True (`SnapshotTaken`) after one succeeded.

Every type and every reason the operator writes is a member of `ConditionType` / `ConditionReason`, here
and nowhere else. They are the operator's own vocabulary, not the node's: Kubernetes wants CamelCase
condition reasons read by people through kubectl, while the node's and gateway's client codes (the
`reason-code` trailer, HTTP error bodies) are UPPER_SNAKE `Reason` members in node/errors.py. The two
audiences never see each other's codes, so they are two enums, each in one place (docs/errors.md).
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from enum import StrEnum
from typing import Any

Condition = dict[str, Any]


class ConditionType(StrEnum):
    READY = "Ready"
    UPGRADING = "Upgrading"
    SNAPSHOTS_READY = "SnapshotsReady"


class ConditionReason(StrEnum):
    """Every `reason` of a ChainNetwork condition (and of the operator's typed errors, errors.py)."""

    # progress
    STARTED = "Started"
    UP_TO_DATE = "UpToDate"
    WAITING_FOR_POD = "WaitingForPod"
    REPLACING_POD = "ReplacingPod"
    SNAPSHOT_BEFORE_ROLLOUT = "SnapshotBeforeRollout"  # the rollout waits for its snapshot (rollout_snapshot.py)
    # rollout holds (gates.py): the rollout waits, it has not failed
    MEMBER_MISSING = "MemberMissing"
    MEMBER_NOT_READY = "MemberNotReady"
    MEMBER_NOT_SERVING = "MemberNotServing"
    MEMBER_UNREACHABLE = "MemberUnreachable"
    MEMBER_LAGGING = "MemberLagging"
    COMPLETED = "Completed"
    SNAPSHOT_TAKEN = "SnapshotTaken"
    # snapshot jobs (snapshot_jobs.py): failed on the node, lost with a node restart, ran too long
    SNAPSHOT_JOB_FAILED = "SnapshotJobFailed"
    SNAPSHOT_JOB_LOST = "SnapshotJobLost"
    SNAPSHOT_JOB_TIMEOUT = "SnapshotJobTimedOut"
    # failures (errors.py: one per error class, plus the ones raised with an explicit reason)
    OPERATOR_ERROR = "OperatorError"
    RETRYING = "Retrying"
    FAILED = "Failed"
    INVALID_SPEC = "InvalidSpec"
    UPGRADE_FAILED = "UpgradeFailed"
    NODE_UNREACHABLE = "NodeUnreachable"
    ADMIN_TOKEN_NEEDS_TLS = "AdminTokenNeedsTLS"  # the admin token goes only over TLS or to loopback
    NO_READY_NODE = "NoReadyNode"
    KUBERNETES_API_ERROR = "KubernetesApiError"
    NOT_FOUND = "NotFound"


def now_iso() -> str:
    return datetime.datetime.now(tz=datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def set_condition(
    conditions: Sequence[Condition],
    type_: str,
    status: bool,
    reason: str,
    message: str,
    generation: int | None = None,
    now: str | None = None,
) -> list[Condition]:
    """A new conditions list with `type_` set; others are left as they are."""
    value = "True" if status else "False"
    old = next((c for c in conditions if c.get("type") == type_), None)
    transition = old["lastTransitionTime"] if old and old.get("status") == value else (now or now_iso())
    entry: Condition = {
        "type": type_,
        "status": value,
        "reason": reason,
        "message": message,
        "lastTransitionTime": transition,
    }
    if generation is not None:
        entry["observedGeneration"] = generation
    return [c for c in conditions if c.get("type") != type_] + [entry]


def get_condition(conditions: Sequence[Condition], type_: str) -> Condition | None:
    return next((c for c in conditions if c.get("type") == type_), None)
