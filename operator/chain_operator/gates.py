"""Rollout gates: what every member of the network must satisfy before a pod is released, and what the
released pod must satisfy before the next one goes.

One check per gate, in this order, each in one place (`member_problem`):
- readiness: the pod exists and Kubernetes says it is Ready;
- SERVING: the node answers SERVING on grpc.health.v1 for `chain.v1.ChainService`;
- catch-up: the node answers GetNodeStatus and is within `max_lag_blocks` of the leader (the highest
  member that answers).
Before a release, every member must pass `stable_checks` observations in a row spaced `stable_interval`
seconds apart (the stabilisation window, `upgrade.release_next`). A failing gate holds the rollout (the
`Upgrading` condition's reason and message say which member and which gate); it does not fail it.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from chain_operator.conditions import ConditionReason
from chain_operator.config import OperatorConfig
from chain_operator.errors import KubeNotFound, NodeUnreachable
from chain_operator.kube import KubeApi, pod_path
from chain_operator.nodes import NodeClient, PodView, pod_view
from chain_operator.spec import Network

R = ConditionReason


@dataclass(frozen=True)
class Member:
    """One member as observed now: its pod (None when absent), health and height (None: did not answer)."""

    name: str
    pod: PodView | None
    serving: bool
    height: int | None


@dataclass(frozen=True)
class Problem:
    member: str
    reason: ConditionReason
    message: str


async def observe_member(kube: KubeApi, config: OperatorConfig, net: Network, ordinal: int) -> Member:
    name = net.spec.pod_name(ordinal)
    try:
        pod = pod_view(await kube.get(pod_path(net.namespace, name)), net.spec.container)
    except KubeNotFound:
        return Member(name, None, False, None)
    if not pod.ip:
        return Member(name, pod, False, None)
    client = NodeClient(pod, config)
    serving = await client.serving()
    try:
        height: int | None = await client.height()
    except NodeUnreachable:
        height = None
    return Member(name, pod, serving, height)


async def observe(kube: KubeApi, config: OperatorConfig, net: Network, replicas: int) -> list[Member]:
    return list(await asyncio.gather(*(observe_member(kube, config, net, i) for i in range(replicas))))


def leader_height(members: list[Member]) -> int:
    return max((m.height for m in members if m.height is not None), default=0)


def member_problem(member: Member, leader: int, max_lag: int) -> Problem | None:
    """The first gate this member fails, or None."""
    if member.pod is None:
        return Problem(member.name, R.MEMBER_MISSING, f"{member.name} does not exist")
    if not member.pod.ready:
        return Problem(member.name, R.MEMBER_NOT_READY, f"{member.name} is not Ready")
    if not member.serving:
        return Problem(member.name, R.MEMBER_NOT_SERVING, f"{member.name} does not answer SERVING")
    if member.height is None:
        return Problem(member.name, R.MEMBER_UNREACHABLE, f"{member.name} does not answer GetNodeStatus")
    if leader - member.height > max_lag:
        behind = leader - member.height
        return Problem(
            member.name, R.MEMBER_LAGGING, f"{member.name} is {behind} blocks behind the leader (max {max_lag})"
        )
    return None


def first_problem(members: list[Member], max_lag: int) -> Problem | None:
    leader = leader_height(members)
    for member in members:
        problem = member_problem(member, leader, max_lag)
        if problem is not None:
            return problem
    return None
