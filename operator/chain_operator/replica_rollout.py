"""Rolling the read replicas (`spec.readReplicas`) after the nodes, one pod at a time, through the same hold.

The chart renders the read-replica StatefulSet at partition = replicas, like the node one, so a change of its pod
template (a helm upgrade's image, configuration, anything) moves no replica until the operator releases it. The
rollout uses the node rollout's machinery over the replicas' StatefulSet (revisions.py: which pods are current,
the settled ordinal, the partition; gates.py: the observations and the gate of one member), with the nodes'
rollout first: `handlers` steps the replicas only once the node rollout says it is done. Before each release
every replica must be Ready, SERVING and within `--max-lag-blocks` of the highest node (GetNodeStatus), and the
replica released last must be back at the template; a failing gate holds the rollout with an `Upgrading`
condition saying which replica and why. Each step reads the StatefulSet and its pods, so a restarted operator
resumes where the partition is. The one thing stored is the release (`status.replicaRollout`: the replica
released last and when): a replica that is not back at the template, Ready, SERVING and caught up within
`--pod-timeout` of its release stops the rollout (UpgradeFailed, as a node pod does), and the record is
removed when the rollout completes.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from chain_operator.conditions import ConditionReason, ConditionType, now_iso
from chain_operator.config import OperatorConfig
from chain_operator.errors import KubeNotFound, UpgradeFailed
from chain_operator.gates import Problem, leader_height, member_problem, observe
from chain_operator.kube import KubeApi
from chain_operator.revisions import UNOBSERVED_WAIT, outdated, pod_views, settled
from chain_operator.spec import Network, parse_time
from chain_operator.upgrade import ConditionUpdate, Rollout, Step, rollout_of

RELEASE = "replicaRollout"  # the status field that records the replica released last and when

T = ConditionType
R = ConditionReason


async def replicas_of(kube: KubeApi, config: OperatorConfig, net: Network) -> Rollout | None:
    """The read-replica StatefulSet as found, seen as a rollout of its own: its `net` is the network seen through
    it (its `statefulset` and `replicas` are the replicas'), so that the node rollout's pod and gate functions
    apply unchanged. None when the network has no read replicas (or their StatefulSet does not exist)."""
    name = net.spec.read_replicas
    if not name:
        return None
    try:
        r = await rollout_of(kube, config, replace(net, spec=replace(net.spec, statefulset=name)))
    except KubeNotFound:
        return None
    return replace(r, net=replace(r.net, spec=replace(r.net.spec, replicas=max(r.replicas, 1))))


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


def waiting_for_released(r: Rollout, status: Mapping[str, Any], name: str, why: str) -> Step:
    """Hold for the replica released last (`name`), unless it was released more than `--pod-timeout` ago."""
    record = status.get(RELEASE) or {}
    since = parse_time(str(record.get("releasedAt", ""))) if record.get("pod") == name else None
    if since is not None:
        waited = (datetime.datetime.now(tz=datetime.UTC) - since).total_seconds()
        if waited > r.config.pod_timeout:
            raise UpgradeFailed(
                f"read replica {name} did not come back within {r.config.pod_timeout:.0f}s: {why}; the read "
                f"replicas' rollout stopped at partition {r.partition}"
            )
    return holding(R.WAITING_FOR_POD, f"waiting for {name}: {why}", r.config.upgrade_poll)


async def step(kube: KubeApi, config: OperatorConfig, net: Network, status: Mapping[str, Any] | None = None) -> Step:
    """One move of the replicas' rollout (called once the nodes' rollout is done): hold them when every replica
    is current, else wait for the one released last (`status`: the ChainNetwork's, for the release record),
    else release the next (highest ordinal first) once every replica passes the gates against the nodes'
    height."""
    status = status or {}
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
            return waiting_for_released(r, status, r.net.spec.pod_name(r.partition), problem.message)
        await r.set_partition(r.replicas)
        message = f"all {r.replicas} read replicas run the template"
        r.log("%s; holding them (partition %d)", message, r.replicas)
        conditions = (ConditionUpdate(T.UPGRADING, False, R.COMPLETED, message),)
        return Step({RELEASE: None} if RELEASE in status else {}, conditions, done=True)
    top = settled(pods, r.image, r.revision)
    if r.partition > top:  # the hold (a render) put the partition back above replicas already replaced
        r = await r.set_partition(top)
    poll = config.upgrade_poll
    if r.partition < r.replicas and top > r.partition:
        name = r.net.spec.pod_name(r.partition)
        return waiting_for_released(r, status, name, "it is not at the template's revision yet")
    name = r.net.spec.pod_name(r.partition - 1)
    problem, leader = await _first_problem(kube, config, net, r)
    if problem is not None:
        return holding(problem.reason, f"holding before releasing {name}: {problem.message}", poll)
    await r.set_partition(r.partition - 1)
    r.log("read replicas at partition %d, replacing %s (nodes at block %d)", r.partition - 1, name, leader)
    released = holding(R.REPLACING_POD, f"replacing read replica {name}", poll)
    return replace(released, status={RELEASE: {"pod": name, "releasedAt": now_iso()}})


async def _first_problem(kube: KubeApi, config: OperatorConfig, net: Network, r: Rollout) -> tuple[Problem | None, int]:
    """The first replica that is not Ready, not SERVING or further behind the nodes than --max-lag-blocks (None
    when every one passes), and the nodes' height it was measured against."""
    leader = leader_height(await observe(kube, config, net, net.spec.replicas))
    for member in await observe(kube, config, r.net, r.replicas):
        problem = member_problem(member, leader, config.max_lag_blocks)
        if problem is not None:
            return problem, leader
    return None, leader
