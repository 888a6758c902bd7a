"""Rolling the read replicas (`spec.readReplicas`) after the nodes, one pod at a time, through the same hold.

The chart renders the read-replica StatefulSet at partition = replicas, like the node one, so a change of its pod
template (a helm upgrade's image, configuration, anything) moves no replica until the operator releases it. The
rollout uses the node rollout's machinery over the replicas' StatefulSet (revisions.py: which pods are current,
the settled ordinal, the partition; gates.py: the observations and the gate of one member), with the nodes'
rollout first: `handlers` steps the replicas only once the node rollout says it is done. Before each release
every replica must be Ready, SERVING and within `--max-lag-blocks` of the highest node (GetNodeStatus), and the
replica released last must be back at the template; a failing gate holds the rollout with an `Upgrading`
condition saying which replica and why. Nothing is stored beyond the partition itself: each step reads the
StatefulSet and its pods, so a restarted operator resumes where the partition is.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace

from chain_operator.conditions import ConditionReason, ConditionType
from chain_operator.config import OperatorConfig
from chain_operator.errors import KubeNotFound
from chain_operator.gates import Problem, leader_height, member_problem, observe
from chain_operator.kube import KubeApi, statefulset_path
from chain_operator.revisions import (
    UNOBSERVED_WAIT,
    observed,
    outdated,
    partition_body,
    pod_views,
    settled,
    update_revision,
)
from chain_operator.spec import Network
from chain_operator.upgrade import ConditionUpdate, Step, container_image, partition_of

log = logging.getLogger("chain.operator.replicas")

T = ConditionType
R = ConditionReason


@dataclass(frozen=True)
class Replicas:
    """The read-replica StatefulSet as found. `net` is the network seen through it (its `statefulset` and
    `replicas` are the replicas'), so that the node rollout's pod and gate functions apply unchanged."""

    kube: KubeApi
    config: OperatorConfig
    net: Network
    replicas: int
    image: str
    partition: int
    revision: str
    observed: bool = True  # the controller has observed the current spec (revisions.observed)

    @property
    def path(self) -> str:
        return statefulset_path(self.net.namespace, self.net.spec.statefulset)

    def log(self, message: str, *args: object) -> None:
        log.info("%s/%s: " + message, self.net.namespace, self.net.name, *args)

    async def set_partition(self, partition: int) -> Replicas:
        await self.kube.merge_patch(self.path, partition_body(partition))
        return replace(self, partition=partition)


async def replicas_of(kube: KubeApi, config: OperatorConfig, net: Network) -> Replicas | None:
    """None when the network has no read replicas (or their StatefulSet does not exist)."""
    name = net.spec.read_replicas
    if not name:
        return None
    try:
        sts = await kube.get(statefulset_path(net.namespace, name))
    except KubeNotFound:
        return None
    count = int(sts.get("spec", {}).get("replicas", 1))
    view = replace(net, spec=replace(net.spec, statefulset=name, replicas=max(count, 1)))
    image = container_image(sts, net.spec.container)
    partition = min(partition_of(sts), count)
    return Replicas(kube, config, view, count, image, partition, update_revision(sts), observed(sts))


async def pending(kube: KubeApi, config: OperatorConfig, net: Network) -> bool:
    """Whether `step` has anything to do: a replica not at the template, or the hold not in place."""
    r = await replicas_of(kube, config, net)
    if r is None:
        return False
    if r.partition < r.replicas or not r.observed:
        return True
    return bool(outdated(await pod_views(kube, r.net, r.replicas), r.image, r.revision))


def holding(reason: ConditionReason, message: str, wait: float) -> Step:
    return Step(conditions=(ConditionUpdate(T.UPGRADING, True, reason, message),), wait=wait)


async def step(kube: KubeApi, config: OperatorConfig, net: Network) -> Step:
    """One move of the replicas' rollout (called once the nodes' rollout is done): hold them when every replica
    is current, else wait for the one released last, else release the next (highest ordinal first) once every
    replica passes the gates against the nodes' height."""
    r = await replicas_of(kube, config, net)
    if r is None:
        return Step(done=True)
    if not r.observed:  # a spec just applied: which replicas are current is not known until it is observed
        return Step(wait=UNOBSERVED_WAIT)
    pods = await pod_views(kube, r.net, r.replicas)
    if not outdated(pods, r.image, r.revision):
        if r.partition >= r.replicas:
            return Step(done=True)
        problem, _ = await _first_problem(kube, config, net, r)  # the replica released last is back, caught up
        if problem is not None:
            why = f"waiting for the read replicas on the template: {problem.message}"
            return holding(R.WAITING_FOR_POD, why, config.upgrade_poll)
        await r.set_partition(r.replicas)
        message = f"all {r.replicas} read replicas run the template"
        r.log("%s; holding them (partition %d)", message, r.replicas)
        return Step(conditions=(ConditionUpdate(T.UPGRADING, False, R.COMPLETED, message),), done=True)
    top = settled(pods, r.image, r.revision)
    if r.partition > top:  # the hold (a render) put the partition back above replicas already replaced
        r = await r.set_partition(top)
    poll = config.upgrade_poll
    if r.partition < r.replicas and top > r.partition:
        name = r.net.spec.pod_name(r.partition)
        return holding(R.WAITING_FOR_POD, f"waiting for {name}: it is not at the template's revision yet", poll)
    name = r.net.spec.pod_name(r.partition - 1)
    problem, leader = await _first_problem(kube, config, net, r)
    if problem is not None:
        return holding(problem.reason, f"holding before releasing {name}: {problem.message}", poll)
    await r.set_partition(r.partition - 1)
    r.log("read replicas at partition %d, replacing %s (nodes at block %d)", r.partition - 1, name, leader)
    return holding(R.REPLACING_POD, f"replacing read replica {name}", poll)


async def _first_problem(
    kube: KubeApi, config: OperatorConfig, net: Network, r: Replicas
) -> tuple[Problem | None, int]:
    """The first replica that is not Ready, not SERVING or further behind the nodes than --max-lag-blocks (None
    when every one passes), and the nodes' height it was measured against."""
    leader = leader_height(await observe(kube, config, net, net.spec.replicas))
    for member in await observe(kube, config, r.net, r.replicas):
        problem = member_problem(member, leader, config.max_lag_blocks)
        if problem is not None:
            return problem, leader
    return None, leader
