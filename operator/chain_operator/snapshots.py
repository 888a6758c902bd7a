"""Scheduled snapshots: the schedule, ChainSnapshot objects, and pruning the oldest beyond retention and
beyond what one pod's volume keeps (`perMember`; the node deletes the directory, then the object goes).
Taking one is a job on a node (snapshot_jobs.py), on the pods in turn.

A snapshot stays on the volume of the pod that took it; the ChainSnapshot says which pod and which
directory (`spec.snapshotName`), so restoring is `chain-node --restore <snapshot dir>` on that volume
(docs/deploy.md).
"""

from __future__ import annotations

import contextlib
import datetime
import logging
from typing import Any

from chain.v1 import node_info_pb2
from chain_operator.config import OperatorConfig
from chain_operator.errors import KubeError, KubeNotFound
from chain_operator.kube import GROUP, NETWORK_LABEL, SNAPSHOTS, VERSION, KubeApi, Obj, custom_path, pod_path
from chain_operator.nodes import NodeClient, PodView, pod_view
from chain_operator.spec import Network, NetworkSpec, parse_time

log = logging.getLogger("chain.operator.snapshots")


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


async def record(kube: KubeApi, net: Network, pod: str, info: node_info_pb2.SnapshotInfo) -> Obj:
    """The ChainSnapshot of a snapshot a job took. Already there (409: an operator restarted between creating
    the object and writing the status) counts as recorded: the name is made of the block and the creation
    time, so it is the same snapshot, and it is recorded once."""
    body = snapshot_object(net, pod, info)
    try:
        created = await kube.create(custom_path(SNAPSHOTS, net.namespace), body)
    except KubeError as exc:
        if exc.status != 409:
            raise
        log.info("snapshot %s of %s was already recorded", info.name, pod)
        return body
    log.info("snapshot %s of %s at block %d", info.name, pod, info.block_number)
    return created


def _order(obj: Obj) -> tuple[int, str]:
    spec = obj.get("spec", {})
    return int(spec.get("blockNumber", 0)), str(spec.get("createdAt", ""))


async def prune(kube: KubeApi, config: OperatorConfig, net: Network) -> list[str]:
    """Delete the oldest ChainSnapshots beyond retention, and the oldest of a pod beyond `per_member`;
    returns the names deleted."""
    objs = await kube.list(custom_path(SNAPSHOTS, net.namespace), {NETWORK_LABEL: net.name})
    objs.sort(key=_order, reverse=True)
    doomed = objs[net.spec.snapshots.retention :]
    on_pod: dict[str, int] = {}
    for obj in objs[: net.spec.snapshots.retention]:
        pod_name = str(obj.get("spec", {}).get("pod", ""))
        on_pod[pod_name] = on_pod.get(pod_name, 0) + 1
        if on_pod[pod_name] > net.spec.per_member:
            doomed.append(obj)
    by_name = {p.name: p for p in await pods(kube, net)}
    deleted: list[str] = []
    for obj in doomed:
        spec, name = obj.get("spec", {}), obj["metadata"]["name"]
        pod = by_name.get(spec.get("pod", ""))
        if pod is None or not pod.ip:
            log.warning("cannot prune %s: pod %s is not there", name, spec.get("pod"))
            continue
        await NodeClient(pod, config).delete_snapshot(spec.get("snapshotName", ""))
        with contextlib.suppress(KubeNotFound):
            await kube.delete(custom_path(SNAPSHOTS, net.namespace, name))
        deleted.append(name)
    return deleted
