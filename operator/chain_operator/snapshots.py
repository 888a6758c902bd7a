"""Scheduled snapshots: take one through a ready node's AdminService, record it as a ChainSnapshot object,
prune the oldest beyond retention (the node deletes the directory, then the object goes).

A snapshot stays on the volume of the pod that took it; the ChainSnapshot says which pod and which
directory (`spec.snapshotName`), so restoring is `chain-node --restore <snapshot dir>` on that volume
(docs/deploy.md).
"""

from __future__ import annotations

import contextlib
import datetime
import logging
from dataclasses import dataclass
from typing import Any

from chain.v1 import node_info_pb2
from chain_operator.conditions import ConditionReason
from chain_operator.config import OperatorConfig
from chain_operator.errors import KubeNotFound, NodeUnreachable, Retry
from chain_operator.kube import GROUP, NETWORK_LABEL, SNAPSHOTS, VERSION, KubeApi, Obj, custom_path, pod_path
from chain_operator.nodes import NodeClient, PodView, pod_view
from chain_operator.spec import NetworkSpec

log = logging.getLogger("chain.operator.snapshots")


@dataclass(frozen=True)
class Network:
    """The ChainNetwork being handled: identity plus its parsed spec."""

    namespace: str
    name: str
    uid: str
    spec: NetworkSpec


def parse_time(text: str) -> datetime.datetime | None:
    try:
        return datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.UTC)
    except (TypeError, ValueError):
        return None


def is_due(spec: NetworkSpec, status: dict[str, Any], now: datetime.datetime) -> bool:
    if not spec.snapshots.enabled:
        return False
    last = parse_time((status.get("snapshots") or {}).get("lastTime", ""))
    return last is None or (now - last).total_seconds() >= spec.snapshots.every_seconds


def snapshot_object(net: Network, pod: str, info: node_info_pb2.SnapshotInfo) -> Obj:
    created = datetime.datetime.fromtimestamp(info.created_at, tz=datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ChainSnapshot",
        "metadata": {
            "name": f"{net.name}-{info.block_number}-{info.created_at}",
            "namespace": net.namespace,
            "labels": {NETWORK_LABEL: net.name},
            # Deleted with the network (the directories on the volumes stay).
            "ownerReferences": [
                {
                    "apiVersion": f"{GROUP}/{VERSION}",
                    "kind": "ChainNetwork",
                    "name": net.name,
                    "uid": net.uid,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "network": net.name,
            "pod": pod,
            "snapshotName": info.name,
            "blockNumber": int(info.block_number),
            "entryCount": int(info.entry_count),
            "stateRoot": info.state_root.hex(),
            "createdAt": created,
        },
    }


async def pods(kube: KubeApi, net: Network) -> list[PodView]:
    """The network's node pods in ordinal order (absent ones skipped)."""
    found: list[PodView] = []
    for ordinal in range(net.spec.replicas):
        try:
            obj = await kube.get(pod_path(net.namespace, net.spec.pod_name(ordinal)))
        except KubeNotFound:
            continue
        found.append(pod_view(obj, net.spec.container))
    return found


async def take(kube: KubeApi, config: OperatorConfig, net: Network) -> Obj:
    """Snapshot the first ready pod that answers; returns the ChainSnapshot object created."""
    candidates = [p for p in await pods(kube, net) if p.ready and p.ip]
    if not candidates:
        message = f"no ready node pod of {net.spec.statefulset}"
        raise Retry(message, reason=ConditionReason.NO_READY_NODE, delay=config.snapshot_tick)
    last_error: NodeUnreachable | None = None
    for pod in candidates:
        try:
            info = await NodeClient(pod, config.admin_token, config.rpc_timeout).create_snapshot()
        except NodeUnreachable as exc:
            log.warning("snapshot on %s failed: %s", pod.name, exc)
            last_error = exc
            continue
        body = snapshot_object(net, pod.name, info)
        created = await kube.create(custom_path(SNAPSHOTS, net.namespace), body)
        log.info("snapshot %s of %s at block %d", info.name, pod.name, info.block_number)
        return created
    assert last_error is not None
    raise last_error


def _order(obj: Obj) -> tuple[int, str]:
    spec = obj.get("spec", {})
    return int(spec.get("blockNumber", 0)), str(spec.get("createdAt", ""))


async def prune(kube: KubeApi, config: OperatorConfig, net: Network) -> list[str]:
    """Delete the oldest ChainSnapshots beyond retention; returns the names deleted."""
    objs = await kube.list(custom_path(SNAPSHOTS, net.namespace), {NETWORK_LABEL: net.name})
    objs.sort(key=_order, reverse=True)
    doomed = objs[net.spec.snapshots.retention :]
    by_name = {p.name: p for p in await pods(kube, net)}
    deleted: list[str] = []
    for obj in doomed:
        spec, name = obj.get("spec", {}), obj["metadata"]["name"]
        pod = by_name.get(spec.get("pod", ""))
        if pod is None or not pod.ip:
            log.warning("cannot prune %s: pod %s is not there", name, spec.get("pod"))
            continue
        await NodeClient(pod, config.admin_token, config.rpc_timeout).delete_snapshot(spec.get("snapshotName", ""))
        with contextlib.suppress(KubeNotFound):
            await kube.delete(custom_path(SNAPSHOTS, net.namespace, name))
        deleted.append(name)
    return deleted
