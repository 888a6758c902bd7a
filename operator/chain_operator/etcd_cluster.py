"""The in-chart etcd's membership run by the operator: etcd_members.py's one step per tick, then the
Kubernetes objects made to match it.

The chart renders the etcd StatefulSet's members from `spec.etcd` (member `NAME` is the pod, reachable at
`NAME.SERVICE.NAMESPACE.svc`); a starting member takes its initial cluster and state from the ConfigMap
`spec.etcd.configMap` (keys `initialCluster`, `initialClusterState`), which the first install writes (the
members of `etcd.replicaCount`, `new`) and this module keeps from then on:

- before a member is added its pod does not exist; after `member add` the ConfigMap names the membership
  with the new member and `existing`, and only then the StatefulSet's replicas rise to let its pod start;
- a member is removed before its pod goes (the replicas fall after the removal);
- a replaced member (answering nothing past `--etcd-replace-after`) is removed and added again, and its pod
  is deleted so that it starts again from its init container.

Every member added (a scale-out or a replacement) gets its id recorded under `id.<pod>` in the ConfigMap: the
init container empties a volume written for another id (a removed member's, e.g. a PVC kept from before a
scale-in), so etcd joins under the new one.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass, field
from typing import Any

import kopf

from chain_operator.config import OperatorConfig
from chain_operator.errors import KubeNotFound, OperatorError, to_kopf
from chain_operator.etcd_members import Change, Kind, Members, Tracker, Wanted
from chain_operator.handlers import network_of, runtime_of
from chain_operator.kube import GROUP, NETWORKS, VERSION, KubeApi, configmap_path, pod_path, statefulset_path
from chain_operator.spec import EtcdSpec, Network
from node.errors import ChainError
from node.server.ordering.etcd.client import EtcdClient

log = logging.getLogger("chain.operator.etcd")


def member(namespace: str, spec: EtcdSpec, ordinal: int) -> Wanted:
    name = spec.pod_name(ordinal)
    host = f"{name}.{spec.service}.{namespace}.svc"
    return Wanted(name, f"{spec.scheme}://{host}:{spec.peer_port}", f"{spec.scheme}://{host}:{spec.client_port}")


@dataclass
class Trackers:
    """One silence tracker per network, kept across ticks (lost with an operator restart: the grace restarts)."""

    by_network: dict[tuple[str, str], Tracker] = field(default_factory=dict)

    def of(self, net: Network) -> Tracker:
        return self.by_network.setdefault((net.namespace, net.name), Tracker())


async def tick(kube: KubeApi, config: OperatorConfig, net: Network, tracker: Tracker) -> Change | None:
    """One membership step of `net`'s etcd (None without `spec.etcd`), then its objects made to match."""
    spec = net.spec.etcd
    if spec is None:
        return None
    sts = await kube.get(statefulset_path(net.namespace, spec.statefulset))
    running = int((sts.get("spec") or {}).get("replicas") or 0)
    endpoints = [member(net.namespace, spec, i).client_url for i in range(max(1, min(running, spec.replicas)))]
    client = EtcdClient(endpoints, tls=config.etcd_tls(), timeout=config.rpc_timeout)
    try:
        steps = Members(client, tls=config.etcd_tls(), replace_after=config.etcd_replace_after, tracker=tracker)
        change = await steps.reconcile(lambda i: member(net.namespace, spec, i), spec.replicas)
    finally:
        await client.close()
    await apply(kube, net.namespace, spec, change)
    return change


async def apply(kube: KubeApi, namespace: str, spec: EtcdSpec, change: Change) -> None:
    """The ConfigMap first (what a starting member reads), then the replicas, then a replaced member's pod."""
    if change.kind in (Kind.ADD, Kind.REPLACE):
        data = {"initialCluster": change.initial_cluster, "initialClusterState": "existing"}
        data[f"id.{change.member}"] = f"{change.member_id:x}"
        await kube.merge_patch(configmap_path(namespace, spec.config_map), {"data": data})
    if change.running > 0:
        await kube.merge_patch(statefulset_path(namespace, spec.statefulset), {"spec": {"replicas": change.running}})
    if change.kind is Kind.REPLACE:
        with contextlib.suppress(KubeNotFound):
            await kube.delete(pod_path(namespace, change.member))
    if change.kind is not Kind.WAIT and change.kind is not Kind.DONE:
        log.info("%s: etcd %s %s (%s); %d pods", namespace, change.kind, change.member, change.detail, change.running)


def register(registry: kopf.OperatorRegistry, config: OperatorConfig) -> None:
    """The `etcd-members` timer: one step per `--etcd-tick` of each ChainNetwork with `spec.etcd`."""
    trackers = Trackers()

    @kopf.timer(GROUP, VERSION, NETWORKS, id="etcd-members", interval=config.etcd_tick, registry=registry)
    async def etcd_members(body: kopf.Body, memo: Any, **_: Any) -> None:
        runtime = runtime_of(memo)
        net = network_of(body)
        if net.spec.etcd is None:
            return
        try:
            change = await tick(runtime.kube, config, net, trackers.of(net))
        except ChainError as exc:  # no quorum for it yet, a leader just elected: the next tick looks again
            raise kopf.TemporaryError(f"etcd membership: {exc}", delay=config.etcd_tick) from exc
        except OperatorError as exc:
            raise to_kopf(exc) from exc
        if change is not None and change.kind is Kind.WAIT:
            log.info("%s/%s: etcd membership waits: %s", net.namespace, net.name, change.detail)
