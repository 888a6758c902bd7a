"""Rolling upgrade of the node StatefulSet, one pod at a time, driven by the StatefulSet partition.

Kubernetes replaces the pods whose ordinal is >= `spec.updateStrategy.rollingUpdate.partition`. Outside a
rollout the partition is `replicas` (the chart renders it so, and the operator puts it back after each rollout):
no pod moves when the pod template changes. Any change of the template starts a rollout, whoever made it
(revisions.py: pods whose revision or image is not the template's are outdated): a new version in the
ChainNetwork (the operator sets the image), or a helm upgrade or GitOps sync that changed the image, the
labels, the configuration. The operator lowers the partition by one: the highest ordinal is replaced. Before
the first release it takes a snapshot (rollout_snapshot.py). Before each release every member must pass
the rollout gates (gates.py: Ready, SERVING, within `--max-lag-blocks` of the leader) on `--stable-checks`
observations spaced `--stable-interval` apart; a failing gate holds the rollout with an `Upgrading`
condition whose reason (`MemberNotReady`, `MemberNotServing`, `MemberLagging`, ...) and message say why.
After a release, the pod just replaced must run the new image, pass the same gates and have reached the
leader's height measured just before it was released. A pod that does not get there within
`--pod-timeout` stops the upgrade: the partition stays where it is (the pods below it keep the old version
and keep serving) and the ChainNetwork says so in its `Upgrading` condition. Each call of `step` does one
thing and says whether to come back; progress lives in the ChainNetwork status (`status.upgrade`, an
`UpgradeProgress`) and in the partition itself, so a restarted operator resumes.

`step` picks one of four phases: `begin` (hold the pods, change the image), `up_to_date` (every pod runs the
template: hold them), `check_released` (the pod last released: still coming back, too late, or the last one),
`release_next`. A render applied during a rollout puts the partition back to `replicas`; `lower_to` takes it
back down to where every pod above is already current (replacing nothing) and the rollout carries on.
"""

from __future__ import annotations

import asyncio
import copy
import datetime
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from chain_operator.conditions import ConditionReason, ConditionType, now_iso
from chain_operator.config import OperatorConfig
from chain_operator.errors import SpecInvalid, UpgradeFailed
from chain_operator.gates import Member, first_problem, leader_height, member_problem, observe
from chain_operator.kube import KubeApi, Obj, statefulset_path
from chain_operator.nodes import PodView
from chain_operator.revisions import (
    UNOBSERVED_WAIT,
    is_current,
    outdated,
    partition_body,
    pod_views,
    settled,
    spec_observed,
    update_revision,
)
from chain_operator.rollout_snapshot import RolloutSnapshot, advance
from chain_operator.spec import Network, parse_time, same_image

log = logging.getLogger("chain.operator.upgrade")

T = ConditionType
R = ConditionReason


@dataclass(frozen=True)
class ConditionUpdate:
    type: ConditionType
    status: bool
    reason: ConditionReason
    message: str


class Phase(StrEnum):
    NONE = ""
    PROGRESSING = "Progressing"
    COMPLETED = "Completed"
    FAILED = "Failed"


@dataclass(frozen=True)
class UpgradeProgress:
    """`status.upgrade` of a ChainNetwork, typed; stored under the same camelCase keys as ever."""

    version: str = ""
    image: str = ""
    from_image: str = ""
    phase: Phase = Phase.NONE
    partition: int = 0
    pod: str = ""
    target_height: int = 0
    pod_since: str = ""
    started_at: str = ""
    message: str = ""
    finished_at: str = ""  # written once the upgrade completed or failed
    revision: str = ""  # the StatefulSet's update revision being rolled out ("" when it reports none)
    snapshot: RolloutSnapshot = field(default_factory=RolloutSnapshot)  # taken before the first release

    @classmethod
    def from_status(cls, raw: Mapping[str, Any] | None) -> UpgradeProgress:
        """Read back what `to_status` wrote (missing or malformed fields take their defaults)."""
        raw = raw or {}
        phase = str(raw.get("phase") or "")
        return cls(
            version=str(raw.get("version") or ""),
            image=str(raw.get("image") or ""),
            from_image=str(raw.get("fromImage") or ""),
            phase=Phase(phase) if phase in {p.value for p in Phase} else Phase.NONE,
            partition=_int(raw.get("partition")),
            pod=str(raw.get("pod") or ""),
            target_height=_int(raw.get("targetHeight")),
            pod_since=str(raw.get("podSince") or ""),
            started_at=str(raw.get("startedAt") or ""),
            message=str(raw.get("message") or ""),
            finished_at=str(raw.get("finishedAt") or ""),
            revision=str(raw.get("revision") or ""),
            snapshot=RolloutSnapshot.from_status(raw.get("snapshot")),
        )

    def to_status(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "version": self.version,
            "image": self.image,
            "fromImage": self.from_image,
            "phase": self.phase.value,
            "partition": self.partition,
            "pod": self.pod,
            "targetHeight": self.target_height,
            "podSince": self.pod_since,
            "startedAt": self.started_at,
            "message": self.message,
            "revision": self.revision,
            "snapshot": self.snapshot.to_status(),  # always written: a merge patch would keep an older one
        }
        if self.finished_at:
            out["finishedAt"] = self.finished_at
        return out

    def running(self, image: str) -> bool:
        return self.phase is Phase.PROGRESSING and self.image == image


def _int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


@dataclass(frozen=True)
class Step:
    """What one step decided: status fields to merge, conditions to set, and whether the upgrade is over."""

    status: dict[str, Any] = field(default_factory=dict)
    conditions: tuple[ConditionUpdate, ...] = ()
    done: bool = False
    wait: float = 0.0


@dataclass(frozen=True)
class Rollout:
    """What every phase reads: the network, the operator's config and the StatefulSet as found."""

    kube: KubeApi
    config: OperatorConfig
    net: Network
    sts: Obj
    replicas: int
    image: str  # the container image of the StatefulSet's template
    partition: int
    revision: str = ""  # the StatefulSet's update revision ("" when it reports none)

    @property
    def sts_path(self) -> str:
        return statefulset_path(self.net.namespace, self.net.spec.statefulset)

    @property
    def observed(self) -> bool:
        """The controller has observed the current spec (revisions.spec_observed)."""
        return spec_observed(self.sts)

    async def set_partition(self, partition: int) -> Rollout:
        await self.kube.merge_patch(self.sts_path, partition_body(partition))
        return replace(self, partition=partition)

    def log(self, message: str, *args: Any) -> None:
        log.info("%s/%s: " + message, self.net.namespace, self.net.name, *args)


def container_image(sts: Obj, container: str) -> str:
    for c in sts.get("spec", {}).get("template", {}).get("spec", {}).get("containers", []):
        if c.get("name") == container:
            return str(c.get("image", ""))
    raise SpecInvalid(f"StatefulSet {sts['metadata']['name']} has no container {container!r}")


def partition_of(sts: Obj) -> int:
    strategy = sts.get("spec", {}).get("updateStrategy", {})
    return int((strategy.get("rollingUpdate") or {}).get("partition") or 0)


def with_image(sts: Obj, container: str, image: str) -> list[Obj]:
    containers: list[Obj] = copy.deepcopy(sts["spec"]["template"]["spec"]["containers"])
    for c in containers:
        if c.get("name") == container:
            c["image"] = image
    return containers


def why_not_done(
    net: Network, members: list[Member], ordinal: int, target: int, max_lag: int, revision: str = ""
) -> str:
    """'' when the released pod runs the new image (and the template's `revision`, when known) and passes
    every gate (Ready, SERVING, within `max_lag` blocks of the leader) and has reached `target`; else what it
    is still missing."""
    member = members[ordinal]
    if member.pod is None:
        return "the pod does not exist yet"
    if not same_image(member.pod.image, net.spec.desired_image):
        return f"it still runs {member.pod.image or 'no image'}"
    if not is_current(member.pod, net.spec.desired_image, revision):
        return f"it still runs revision {member.pod.revision}, the template is at {revision}"
    problem = member_problem(member, leader_height(members), max_lag)
    if problem is not None:
        return problem.message
    if member.height is not None and member.height < target:
        return f"it is at block {member.height}, the network was at {target}"
    return ""


async def rollout_of(kube: KubeApi, config: OperatorConfig, net: Network) -> Rollout:
    sts = await kube.get(statefulset_path(net.namespace, net.spec.statefulset))
    replicas = int(sts.get("spec", {}).get("replicas", 1))
    image = container_image(sts, net.spec.container)
    partition = min(partition_of(sts), replicas)
    return Rollout(kube, config, net, sts, replicas, image, partition, update_revision(sts))


async def pending(kube: KubeApi, config: OperatorConfig, net: Network) -> bool:
    """Whether `step` has anything to do: a new image asked for, a pod not at the template, the hold not
    in place (what the periodic template check looks at before it steps)."""
    r = await rollout_of(kube, config, net)
    if not same_image(r.image, net.spec.desired_image) or r.partition < r.replicas or not r.observed:
        return True
    return bool(outdated(await pod_views(kube, net, r.replicas), r.image, r.revision))


async def step(kube: KubeApi, config: OperatorConfig, net: Network, status: Mapping[str, Any]) -> Step:
    """One move of the upgrade (or none), chosen from the StatefulSet, its pods and `status.upgrade`."""
    rollout = await rollout_of(kube, config, net)
    progress = UpgradeProgress.from_status(status.get("upgrade"))
    desired = net.spec.desired_image
    if not same_image(rollout.image, desired):
        return await begin(rollout)
    if not rollout.observed:  # a spec just applied: which pods are current is not known until it is observed
        return Step(wait=UNOBSERVED_WAIT)
    pods = await pod_views(kube, net, rollout.replicas)
    top = settled(pods, rollout.image, rollout.revision)
    if not outdated(pods, rollout.image, rollout.revision) and not progress.running(desired):
        return await up_to_date(rollout, progress)
    if not progress.running(desired) or progress.revision != rollout.revision:
        progress = await adopt(rollout, progress, pods)
    if rollout.partition > top:
        rollout = await lower_to(rollout, top)
    if rollout.partition < rollout.replicas:
        # The pod released last, or (when released pods are not back at the template yet) the highest of them.
        decided = await check_released(rollout, progress, max(rollout.partition, top - 1))
        if decided is not None:
            return decided
    return await release_next(rollout, progress)


async def lower_to(r: Rollout, ordinal: int) -> Rollout:
    """Put the partition back down to `ordinal` after a render raised it to `replicas` mid-rollout: every pod
    from `ordinal` up is current already, so the controller replaces none of them."""
    lowered = await r.set_partition(ordinal)
    r.log("partition raised to %d by a render; back to %d (every pod above is current)", r.partition, ordinal)
    return lowered


async def hold(r: Rollout) -> None:
    """Partition = replicas: no pod moves when the template changes (revisions.py)."""
    if r.partition < r.replicas:
        await r.set_partition(r.replicas)
        r.log("holding every pod (partition %d)", r.replicas)


async def adopt(r: Rollout, progress: UpgradeProgress, pods: list[PodView | None]) -> UpgradeProgress:
    """The template already asks for the desired image but `status.upgrade` does not say so: the status was
    read before this operator's own write landed (a stale body), or that write was lost. The StatefulSet is
    the truth (only `begin` puts the image there): carry on from its partition as the upgrade in progress, with
    a fresh clock for the pod in flight. (Trusting the stale status instead recorded the upgrade complete at
    partition 0 while the last pod was still being replaced.) The image it came from is the one the stale
    status names, else the one ordinal 0 (replaced last) runs."""
    spec = r.net.spec
    if progress.phase is Phase.PROGRESSING and same_image(progress.image, spec.desired_image):
        # The template changed again mid-rollout (a render, an edit): the same rollout, to the new revision.
        return replace(progress, revision=r.revision)
    from_image = progress.image if not same_image(progress.image, spec.desired_image) else progress.from_image
    if not from_image and pods and pods[0] is not None:
        from_image = pods[0].image  # ordinal 0 is replaced last
    fresh = progress.phase is not Phase.PROGRESSING
    return replace(
        progress,
        revision=r.revision,
        snapshot=RolloutSnapshot() if fresh else progress.snapshot,
        version=spec.version,
        image=spec.desired_image,
        from_image=from_image,
        phase=Phase.PROGRESSING,
        target_height=0,
        pod_since=now_iso(),
        started_at=progress.started_at if progress.phase is Phase.PROGRESSING else now_iso(),
    )


async def begin(r: Rollout) -> Step:
    """Hold every pod at its revision, then change the template: nothing moves until the partition drops."""
    spec = r.net.spec
    body = partition_body(r.replicas)
    body["spec"]["template"] = {"spec": {"containers": with_image(r.sts, spec.container, spec.desired_image)}}
    await r.kube.merge_patch(r.sts_path, body)
    progress = UpgradeProgress(
        version=spec.version,
        image=spec.desired_image,
        from_image=r.image,
        phase=Phase.PROGRESSING,
        partition=r.replicas,
        pod_since=now_iso(),
        started_at=now_iso(),
    )
    message = f"rolling {r.image} -> {spec.desired_image}, one pod at a time"
    r.log("%s", message)
    return Step({"upgrade": progress.to_status()}, (ConditionUpdate(T.UPGRADING, True, R.STARTED, message),))


async def up_to_date(r: Rollout, progress: UpgradeProgress) -> Step:
    """Nothing in flight and every pod runs the template: hold them (partition = replicas, in case it was
    left lower, e.g. by an older chart) and record the version. When the status
    says an upgrade to this image completed, this is the same step run again (kopf retrying a handler whose
    outcome it could not store, or the resume handler of a restarted operator): that upgrade's `Upgrading`
    condition (`Completed`, and when) stays as it was written."""
    await hold(r)
    spec = r.net.spec
    ready = ConditionUpdate(T.READY, True, R.UP_TO_DATE, f"version {spec.version}")
    if progress.phase is Phase.COMPLETED and same_image(progress.image, spec.desired_image):
        conditions: tuple[ConditionUpdate, ...] = (ready,)
    else:
        message = f"the StatefulSet runs {spec.desired_image}"
        conditions = (ConditionUpdate(T.UPGRADING, False, R.UP_TO_DATE, message), ready)
    return Step({"currentVersion": spec.version}, conditions, done=True)


async def check_released(r: Rollout, progress: UpgradeProgress, ordinal: int) -> Step | None:
    """The pod released last (`ordinal`): wait for it, give up on it, or finish (and hold the pods again);
    None when the next may go."""
    spec = r.net.spec
    members = await observe(r.kube, r.config, r.net, r.replicas)
    max_lag = r.config.max_lag_blocks
    missing = why_not_done(r.net, members, ordinal, progress.target_height, max_lag, r.revision)
    name = spec.pod_name(ordinal)
    if missing:
        since = parse_time(progress.pod_since) or datetime.datetime.now(tz=datetime.UTC)
        waited = (datetime.datetime.now(tz=datetime.UTC) - since).total_seconds()
        if waited > r.config.pod_timeout:
            raise UpgradeFailed(
                f"pod {name} did not come back within {r.config.pod_timeout:.0f}s: {missing}; the upgrade "
                f"stopped at partition {r.partition} (pods below it still run {progress.from_image})"
            )
        message = f"waiting for {name}: {missing}"
        return Step(
            {"upgrade": replace(progress, message=message).to_status()},
            (ConditionUpdate(T.UPGRADING, True, R.WAITING_FOR_POD, message),),
            wait=r.config.upgrade_poll,
        )
    if r.partition > 0:
        return None
    await hold(r)
    done = replace(progress, phase=Phase.COMPLETED, partition=r.replicas, finished_at=now_iso(), message="")
    message = f"all {r.replicas} pods run {spec.desired_image}"
    r.log("%s", message)
    return Step(
        {"upgrade": done.to_status(), "currentVersion": spec.version},
        (
            ConditionUpdate(T.UPGRADING, False, R.COMPLETED, message),
            ConditionUpdate(T.READY, True, R.UP_TO_DATE, f"version {spec.version}"),
        ),
        done=True,
    )


async def release_next(r: Rollout, progress: UpgradeProgress) -> Step:
    """Release the next pod (the next lower ordinal) once every member has passed the gates on
    `stable_checks` observations spaced `stable_interval` apart (the stabilisation window, observed within
    this one step so that nothing depends on a status read back between steps; a restarted operator simply
    observes a whole window again). Any failed observation holds the rollout, saying why."""
    name = r.net.spec.pod_name(r.partition - 1)
    if r.config.rollout_snapshot and not progress.snapshot.taken:
        waiting, progress = await snapshot_first(r, progress, name)
        if waiting is not None:
            return waiting
    leader = 0
    for check in range(1, r.config.stable_checks + 1):
        if check > 1:
            await asyncio.sleep(r.config.stable_interval)
        members = await observe(r.kube, r.config, r.net, r.replicas)
        problem = first_problem(members, r.config.max_lag_blocks)
        if problem is not None:
            message = f"holding before releasing {name}: {problem.message}"
            if check > 1:
                message += f" (on check {check} of {r.config.stable_checks})"
            return Step(
                {"upgrade": replace(progress, message=message).to_status()},
                (ConditionUpdate(T.UPGRADING, True, problem.reason, message),),
                wait=r.config.upgrade_poll,
            )
        leader = leader_height(members)
    return await release(r, progress, leader)


def hold_step(r: Rollout, progress: UpgradeProgress, reason: ConditionReason, message: str) -> Step:
    return Step(
        {"upgrade": replace(progress, message=message).to_status()},
        (ConditionUpdate(T.UPGRADING, True, reason, message),),
        wait=r.config.upgrade_poll,
    )


async def snapshot_first(r: Rollout, progress: UpgradeProgress, name: str) -> tuple[Step | None, UpgradeProgress]:
    """Before the first release: the gates once (no snapshot of a sick network), then the snapshot's next move.
    A Step that holds while it is not taken; None once it is, with the progress that records it (written with
    the release)."""
    problem = first_problem(await observe(r.kube, r.config, r.net, r.replicas), r.config.max_lag_blocks)
    if problem is not None:
        return hold_step(r, progress, problem.reason, f"holding before releasing {name}: {problem.message}"), progress
    taking = await advance(r.kube, r.config, r.net, progress.snapshot)
    progress = replace(progress, snapshot=taking.record)
    if taking.waiting:
        return hold_step(r, progress, taking.reason, f"holding before releasing {name}: {taking.waiting}"), progress
    snap = taking.record
    r.log("snapshot %s (block %d on %s) taken before the rollout", snap.name, snap.block, snap.pod)
    return None, progress


async def release(r: Rollout, progress: UpgradeProgress, target: int) -> Step:
    """Lower the partition by one: Kubernetes replaces that pod; it must come back to `target`."""
    released = r.partition - 1
    if partition_of(await r.kube.get(r.sts_path)) != r.partition:  # moved while we observed: look again
        return Step(wait=r.config.upgrade_poll)
    await r.set_partition(released)
    name = r.net.spec.pod_name(released)
    # The image and version come from the spec, not from the status read: a status read from before `begin`
    # (a stale body) would otherwise carry the old image on, `running` would stay false, and at partition 0
    # the upgrade would be recorded done before the last pod came back.
    progress = replace(
        progress,
        version=r.net.spec.version,
        image=r.net.spec.desired_image,
        revision=r.revision,
        phase=Phase.PROGRESSING,
        partition=released,
        pod=name,
        target_height=target,
        pod_since=now_iso(),
        message=f"replacing {name}",
    )
    r.log("partition %d, replacing %s (target height %d)", released, name, target)
    return Step(
        {"upgrade": progress.to_status()},
        (ConditionUpdate(T.UPGRADING, True, R.REPLACING_POD, f"replacing {name}; it must reach block {target}"),),
        wait=r.config.upgrade_poll,
    )


def failed(progress: UpgradeProgress, exc: UpgradeFailed) -> Step:
    stopped = replace(progress, phase=Phase.FAILED, message=str(exc), finished_at=now_iso())
    return Step(
        {"upgrade": stopped.to_status()},
        (
            ConditionUpdate(T.UPGRADING, False, exc.reason, str(exc)),
            ConditionUpdate(T.READY, False, exc.reason, str(exc)),
        ),
        done=True,
    )
