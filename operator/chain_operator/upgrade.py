"""Rolling upgrade of the node StatefulSet, one pod at a time, driven by the StatefulSet partition.

Kubernetes replaces the pods whose ordinal is >= `spec.updateStrategy.rollingUpdate.partition`. To change
the version the operator first sets the partition to `replicas` (nothing may move) together with the new
image, then lowers it by one: the highest ordinal is replaced. Before it releases the next pod, the one
just replaced must run the new image, be Ready, answer SERVING on grpc.health.v1, and have reached the
network height measured just before it was released (the height of the highest ready node). A pod that
does not get there within `--pod-timeout` stops the upgrade: the partition stays where it is (the pods
below it keep the old version and keep serving) and the ChainNetwork says so in its `Upgrading`
condition. Each call of `step` does one thing and says whether to come back; progress lives in the
ChainNetwork status (`status.upgrade`) and in the partition itself, so a restarted operator resumes.
"""

from __future__ import annotations

import copy
import datetime
import logging
from dataclasses import dataclass, field
from typing import Any

from chain_operator.conditions import now_iso
from chain_operator.config import OperatorConfig
from chain_operator.errors import KubeNotFound, NodeUnreachable, SpecInvalid, UpgradeFailed
from chain_operator.kube import KubeApi, Obj, pod_path, statefulset_path
from chain_operator.nodes import NodeClient, PodView, pod_view
from chain_operator.snapshots import Network, parse_time

log = logging.getLogger("chain.operator.upgrade")


@dataclass(frozen=True)
class ConditionUpdate:
    type: str
    status: bool
    reason: str
    message: str


@dataclass(frozen=True)
class Step:
    """What one step decided: status fields to merge, conditions to set, and whether the upgrade is over."""

    status: dict[str, Any] = field(default_factory=dict)
    conditions: tuple[ConditionUpdate, ...] = ()
    done: bool = False
    wait: float = 0.0


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


async def _pod(kube: KubeApi, net: Network, ordinal: int) -> PodView | None:
    try:
        return pod_view(await kube.get(pod_path(net.namespace, net.spec.pod_name(ordinal))), net.spec.container)
    except KubeNotFound:
        return None


async def network_height(kube: KubeApi, config: OperatorConfig, net: Network, replicas: int) -> int:
    """The height of the highest ready node that answers (0 when none does)."""
    best = 0
    for ordinal in range(replicas):
        pod = await _pod(kube, net, ordinal)
        if pod is None or not pod.ready or not pod.ip:
            continue
        try:
            best = max(best, await NodeClient(pod, config.admin_token, config.rpc_timeout).height())
        except NodeUnreachable as exc:
            log.info("height of %s unknown: %s", pod.name, exc)
    return best


async def why_not_done(config: OperatorConfig, net: Network, pod: PodView | None, target: int) -> str:
    """'' when the pod is upgraded, ready, serving and caught up; else what it is still missing."""
    if pod is None:
        return "the pod does not exist yet"
    if pod.image != net.spec.desired_image:
        return f"it still runs {pod.image or 'no image'}"
    if not pod.ready or not pod.ip:
        return "it is not Ready"
    client = NodeClient(pod, config.admin_token, config.rpc_timeout)
    if not await client.serving():
        return "it does not answer SERVING on grpc.health.v1"
    try:
        height = await client.height()
    except NodeUnreachable as exc:
        return str(exc)
    if height < target:
        return f"it is at block {height}, the network was at {target}"
    return ""


async def step(kube: KubeApi, config: OperatorConfig, net: Network, status: dict[str, Any]) -> Step:
    spec = net.spec
    sts = await kube.get(statefulset_path(net.namespace, spec.statefulset))
    replicas = int(sts.get("spec", {}).get("replicas", 1))
    image = container_image(sts, spec.container)
    partition = min(partition_of(sts), replicas)
    progress: dict[str, Any] = dict(status.get("upgrade") or {})
    running = progress.get("phase") == "Progressing" and progress.get("image") == spec.desired_image

    if image != spec.desired_image:
        # Hold every pod at its revision, then change the template: nothing moves until the partition drops.
        body = {
            "spec": {
                "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": replicas}},
                "template": {"spec": {"containers": with_image(sts, spec.container, spec.desired_image)}},
            }
        }
        await kube.merge_patch(statefulset_path(net.namespace, spec.statefulset), body)
        progress = {
            "version": spec.version,
            "image": spec.desired_image,
            "fromImage": image,
            "phase": "Progressing",
            "partition": replicas,
            "pod": "",
            "targetHeight": 0,
            "podSince": now_iso(),
            "startedAt": now_iso(),
            "message": "",
        }
        message = f"rolling {image} -> {spec.desired_image}, one pod at a time"
        log.info("%s/%s: %s", net.namespace, net.name, message)
        return Step({"upgrade": progress}, (ConditionUpdate("Upgrading", True, "Started", message),))

    if not running and partition == 0:
        # Nothing in flight and every pod may already run this image: just record the version.
        return Step(
            {"currentVersion": spec.version},
            (
                ConditionUpdate("Upgrading", False, "UpToDate", f"the StatefulSet runs {spec.desired_image}"),
                ConditionUpdate("Ready", True, "UpToDate", f"version {spec.version}"),
            ),
            done=True,
        )

    if partition < replicas:
        pod = await _pod(kube, net, partition)
        target = int(progress.get("targetHeight") or 0)
        missing = await why_not_done(config, net, pod, target)
        name = spec.pod_name(partition)
        if missing:
            since = parse_time(progress.get("podSince", "")) or datetime.datetime.now(tz=datetime.UTC)
            waited = (datetime.datetime.now(tz=datetime.UTC) - since).total_seconds()
            if waited > config.pod_timeout:
                raise UpgradeFailed(
                    f"pod {name} did not come back within {config.pod_timeout:.0f}s: {missing}; the upgrade "
                    f"stopped at partition {partition} (pods below it still run {progress.get('fromImage', '')})"
                )
            message = f"waiting for {name}: {missing}"
            return Step(
                {"upgrade": {**progress, "message": message}},
                (ConditionUpdate("Upgrading", True, "WaitingForPod", message),),
                wait=config.upgrade_poll,
            )
        if partition == 0:
            done = {**progress, "phase": "Completed", "finishedAt": now_iso(), "message": ""}
            message = f"all {replicas} pods run {spec.desired_image}"
            log.info("%s/%s: %s", net.namespace, net.name, message)
            return Step(
                {"upgrade": done, "currentVersion": spec.version},
                (
                    ConditionUpdate("Upgrading", False, "Completed", message),
                    ConditionUpdate("Ready", True, "UpToDate", f"version {spec.version}"),
                ),
                done=True,
            )

    # Release the next pod (the next lower ordinal) after measuring the height it must reach again.
    target = await network_height(kube, config, net, replicas)
    released = partition - 1
    body = {"spec": {"updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": released}}}}
    await kube.merge_patch(statefulset_path(net.namespace, spec.statefulset), body)
    name = spec.pod_name(released)
    progress = {
        **progress,
        "phase": "Progressing",
        "partition": released,
        "pod": name,
        "targetHeight": target,
        "podSince": now_iso(),
        "message": f"replacing {name}",
    }
    log.info("%s/%s: partition %d, replacing %s (target height %d)", net.namespace, net.name, released, name, target)
    return Step(
        {"upgrade": progress},
        (ConditionUpdate("Upgrading", True, "ReplacingPod", f"replacing {name}; it must reach block {target}"),),
        wait=config.upgrade_poll,
    )


def failed(progress: dict[str, Any], exc: UpgradeFailed) -> Step:
    return Step(
        {"upgrade": {**progress, "phase": "Failed", "message": str(exc), "finishedAt": now_iso()}},
        (
            ConditionUpdate("Upgrading", False, exc.reason, str(exc)),
            ConditionUpdate("Ready", False, exc.reason, str(exc)),
        ),
        done=True,
    )
