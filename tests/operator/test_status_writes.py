"""Status writes from a stale body (chain_operator/status.py): the handlers against kmock, given the body as
it was before the upgrade began, while the API already holds the upgrade in progress.

kopf can hand a handler such a body (its annotation patch and its status patch are two calls; under load the
first one's event is processed alone), and the snapshot timer runs beside the upgrade handler. Each test
fails when the re-read (deciding from kopf's body) or the per-object lock alone is removed."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import kmock
import kopf
import pytest

from chain_operator import status
from chain_operator.conditions import ConditionReason, ConditionType
from chain_operator.config import OperatorConfig
from chain_operator.handlers import Runtime, handle_snapshots, handle_upgrade
from chain_operator.kube import KubeApi
from chain_operator.upgrade import ConditionUpdate
from tests.fixtures.kubecluster import NETWORKS, STATEFULSETS
from tests.operator.conftest import NAMESPACE, network, network_status, statefulset

NEW = "registry.test/chain-node:1.1"
PROGRESSING = {
    "version": "1.1",
    "image": NEW,
    "fromImage": "registry.test/chain-node:1.0",
    "phase": "Progressing",
    "partition": 2,
    "pod": "",
    "targetHeight": 0,
    "podSince": "2026-01-01T00:00:00Z",
    "startedAt": "2026-01-01T00:00:00Z",
    "message": "rolling",
}
UPGRADING = {
    "type": "Upgrading",
    "status": "True",
    "reason": "Started",
    "message": "rolling",
    "lastTransitionTime": "2026-01-01T00:00:00Z",
}


def held_statefulset(k: kmock.KubernetesEmulator) -> None:
    """What `begin` left: the template asks for 1.1, every pod is held (partition 2); no pod exists."""
    k.objects[STATEFULSETS, NAMESPACE, "chain-node"] = statefulset(NEW, 2, 2)


def stale_and_current(k: kmock.KubernetesEmulator, every: str = "") -> dict[str, Any]:
    """Put the current ChainNetwork (1.1 asked, the upgrade in progress) in kmock; return the stale body kopf
    may still hand over: the same spec, the status from before the upgrade began."""
    current = network("main", "1.1", 2, every=every)
    stale = copy.deepcopy(current)
    stale["status"] = {"currentVersion": "1.0", "conditions": []}
    current["status"] = {"currentVersion": "1.0", "upgrade": PROGRESSING, "conditions": [UPGRADING]}
    k.objects[NETWORKS, NAMESPACE, "main"] = current
    return stale


@pytest.fixture
async def runtime(cluster: kmock.KubernetesEmulator) -> Any:
    rt = Runtime(OperatorConfig(namespaces=(NAMESPACE,), upgrade_poll=0.2, stable_checks=1, snapshot_tick=0.3))
    await rt.replace_kube(KubeApi(kopf.ConnectionInfo(server=str(cluster.url).rstrip("/"))))
    yield rt
    await rt.replace_kube(None)


def condition(k: kmock.KubernetesEmulator, type_: str) -> dict[str, Any]:
    conds = network_status(k, "main").get("conditions", [])
    return next((c for c in conds if c["type"] == type_), {})


async def test_a_hold_decided_on_a_stale_body_keeps_the_upgrade_progressing(cluster, runtime):
    held_statefulset(cluster)
    stale = stale_and_current(cluster)
    with pytest.raises(kopf.TemporaryError):
        await handle_upgrade(runtime, stale)
    # The hold (no pod exists) is recorded on the upgrade as it is, not on the stale one (`phase: ''`).
    assert network_status(cluster, "main")["upgrade"]["phase"] == "Progressing"
    assert network_status(cluster, "main")["upgrade"]["startedAt"] == PROGRESSING["startedAt"]
    assert condition(cluster, "Upgrading")["reason"] == "MemberMissing"


async def test_a_snapshot_tick_on_a_stale_body_keeps_the_upgrading_condition(cluster, runtime):
    stale = stale_and_current(cluster, every="1m")
    with pytest.raises(kopf.TemporaryError):  # no ready pod: the start is refused, recorded, retried
        await handle_snapshots(runtime, stale)
    assert condition(cluster, "SnapshotsReady")["reason"] == "NoReadyNode"
    assert condition(cluster, "Upgrading") == UPGRADING
    assert network_status(cluster, "main")["upgrade"] == PROGRESSING


async def test_the_upgrade_handler_and_the_snapshot_timer_together_lose_neither_write(cluster, runtime):
    held_statefulset(cluster)
    for _ in range(5):
        stale = stale_and_current(cluster, every="1m")
        results = await asyncio.gather(
            handle_upgrade(runtime, stale), handle_snapshots(runtime, stale), return_exceptions=True
        )
        assert all(isinstance(r, kopf.TemporaryError) for r in results), results
        assert condition(cluster, "Upgrading")["reason"] == "MemberMissing"
        assert condition(cluster, "SnapshotsReady")["reason"] == "NoReadyNode"
        assert network_status(cluster, "main")["upgrade"]["phase"] == "Progressing"


async def test_a_write_refused_with_409_is_merged_into_a_fresh_read_and_retried(cluster, runtime):
    # Another writer lands between this handler's read and its patch: the API refuses the patch (409, the
    # resourceVersion guard) and the write must re-read and merge into what the other writer left, not
    # overwrite it. kmock keeps no resourceVersion, so the conflict is injected: the first status patch
    # adds the other writer's condition and answers 409, as an API server would have.
    current = network("main", "1.1", 2)
    current["status"] = {"currentVersion": "1.0", "conditions": [UPGRADING]}
    cluster.objects[NETWORKS, NAMESPACE, "main"] = current
    body = copy.deepcopy(current)
    other = {**UPGRADING, "type": "SnapshotsReady", "reason": "NoReadyNode", "message": "written meanwhile"}

    def meanwhile() -> dict[str, Any]:
        obj = cluster.objects[NETWORKS, NAMESPACE, "main"]
        obj["status"] = {**obj["status"], "conditions": [*obj["status"]["conditions"], other]}
        return {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Conflict", "code": 409}

    cluster["patch", kmock.subresource("status")][:1] << 409 << meanwhile
    update = ConditionUpdate(ConditionType.READY, True, ConditionReason.STARTED, "mine")
    assert runtime.kube is not None
    await status.write(runtime.kube, body, {"currentVersion": "1.1"}, [update])
    patches = [r for r in cluster if r.method == "PATCH" and r.resource is not None]
    assert len(patches) == 2  # refused once, then written
    assert network_status(cluster, "main")["currentVersion"] == "1.1"
    assert condition(cluster, "SnapshotsReady")["message"] == "written meanwhile"  # the other write is kept
    assert condition(cluster, "Ready")["message"] == "mine"
    assert condition(cluster, "Upgrading") == UPGRADING
