"""A release of the chart, as the real helm renders it, applied to a running network: nothing rolls unless the
operator releases it.

The chart is rendered at one release and the next (chart version, appVersion and so the image, a configuration
value) by the real helm binary; the rendered node StatefulSet and ChainNetwork go into the operator's harness
(kmock, the StatefulSet double playing the controller over real chain-node processes, the real operator). The
next render is applied as `helm upgrade` applies it: every field the chart renders is set (the partition, the
template), the ChainNetwork's version with it. While a member fails a gate no pod is replaced; once it passes,
the operator takes its snapshot and releases the pods one at a time, highest ordinal first. A render that changes
only the configuration (same image, same versions) rolls through the same gated path, found by the operator's
periodic template check. With the hold removed from the chart (partition 0) the double, as the StatefulSet
controller would, replaces the pods as soon as the render lands and the first assertion fails.

The read replicas (`readReplicas`, a second StatefulSet double) are held the same way and rolled by the operator
after the nodes: no replica is replaced while the nodes roll, nor while a replica fails its readiness gate, then
one at a time, highest ordinal first. With the replicas' hold removed from the chart the double replaces them
as soon as the render lands, while the nodes roll, and the test fails.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from tests.charts.helm import PROFILES, Manifests, chart_at, render
from tests.fixtures.kubecluster import NETWORKS, SNAPSHOTS, StatefulSetDouble, live
from tests.operator.conftest import NAMESPACE, create_network, eventually, network_status, patch_network

NODE, REPLICA, NETWORK = "prod-chain-node", "prod-chain-replica", "prod-chain"
OLD, NEW = "ghcr.io/example/chain-node:1.0", "ghcr.io/example/chain-node:1.1"
FAST = ["--empty-block-interval", "0.1"]


def rendered(directory: Path, version: str, app_version: str, log_level: str) -> Manifests:
    args = (
        *PROFILES["replicated"],
        "--set", f"node.replicaCount=2,node.logLevel={log_level},readReplicas.enabled=true,readReplicas.replicaCount=2",
        "--set-json", 'node.genesis={"chain_id": "rolls"}',
    )  # fmt: skip
    return render(chart_at(directory, version, app_version), *args)


def network_body(m: Manifests) -> dict[str, Any]:
    """The rendered ChainNetwork, with what kmock needs (uid, generation, resourceVersion) and no scheduled
    snapshots (the timer's jobs are not what this test is about)."""
    body = m.get("ChainNetwork", NETWORK)
    body["metadata"].update(uid=f"uid-{NETWORK}", generation=1, resourceVersion="1")
    body["spec"]["snapshots"] = {"every": "", "retention": 3}
    return body


def helm_upgrade(sts: StatefulSetDouble, m: Manifests) -> None:
    """Apply the rendered StatefulSet as helm's three-way merge does for the fields the chart sets."""
    new = m.get("StatefulSet", sts.name)
    raw = sts.statefulset()
    raw["metadata"]["labels"] = new["metadata"]["labels"]
    raw["spec"] = {**raw["spec"], **new["spec"]}
    sts.apply(raw)


def upgrading(k: Any) -> dict[str, Any]:
    return next((c for c in network_status(k, NETWORK).get("conditions", []) if c["type"] == "Upgrading"), {})


async def held_then_rolled(
    cluster: Any, sts: StatefulSetDouble, gated: int, done: Any, untouched: StatefulSetDouble
) -> tuple[list[str], int, int]:
    """With member `gated` failing its readiness gate: the rollout holds and no pod is replaced. Then the gate
    passes: the rollout runs to `done()`, never more than one pod down, and no pod of `untouched` (the read
    replicas) is replaced meanwhile; the pods replaced, in order, and the highest count of pods down at once."""
    before, kept = len(sts.replaced), len(untouched.replaced)
    await eventually(
        lambda: sts.replaced[before:] or upgrading(cluster).get("reason") == "MemberNotReady", 60, "the gate to hold"
    )
    await asyncio.sleep(3.0)  # the hold lasts: nothing is released behind it
    assert sts.replaced[before:] == [], "a pod was replaced while a member failed its gate"
    assert upgrading(cluster)["reason"] == "MemberNotReady", upgrading(cluster)
    assert sts.statefulset()["spec"]["updateStrategy"]["rollingUpdate"]["partition"] == 2
    most_down = 0

    def finished() -> bool:
        nonlocal most_down
        most_down = max(most_down, sum(1 for i in range(2) if sts.procs.get(i) is None))
        assert not sts.failures, sts.failures
        if untouched.replaced[kept:]:  # the replicas may start as soon as every node pod is back
            assert len(sts.replaced) - before >= 2, "a read replica was replaced before the nodes were done"
        return bool(done())

    sts.set_ready(gated, True)
    await eventually(finished, 180, "the rollout")
    return [pod for pod, _ in sts.replaced[before:]], most_down, kept


async def replicas_rolled(
    cluster: Any, replicas: StatefulSetDouble, gated: int | None, since: int
) -> tuple[list[str], int]:
    """After the nodes, with read replica `gated` (if any) failing its readiness gate: the replicas' rollout holds.
    Then it passes: the replicas roll to the template, never more than one down, and are held again. The pods
    replaced since `since` (the replicas' count when the nodes' rollout began)."""
    before = since
    if gated is not None:
        await eventually(lambda: REPLICA in upgrading(cluster).get("message", ""), 60, "the replicas' gate to hold")
        await asyncio.sleep(2.0)  # the hold lasts: nothing is released behind it
        assert replicas.replaced[before:] == [], "a read replica was replaced while a replica failed its gate"
        assert upgrading(cluster)["reason"] == "MemberNotReady", upgrading(cluster)
        replicas.set_ready(gated, True)
    most_down, recorded = 0, False

    def finished() -> bool:
        nonlocal most_down, recorded
        most_down = max(most_down, sum(1 for i in range(2) if replicas.procs.get(i) is None))
        recorded = recorded or "replicaRollout" in network_status(cluster, NETWORK)  # the release, for its timeout
        assert not replicas.failures, replicas.failures
        revision = replicas.template()[0]
        held = replicas.statefulset()["spec"]["updateStrategy"]["rollingUpdate"]["partition"] == 2
        current = all(replicas.pod_revision(i) == revision for i in range(2))
        return held and current and upgrading(cluster).get("reason") == "Completed"

    await eventually(finished, 120, "the replicas' rollout")
    assert recorded, "no release of a read replica was recorded in the status"
    return [pod for pod, _ in replicas.replaced[before:]], most_down


async def test_a_chart_release_rolls_node_pods_only_through_the_operator(cluster, start_operator, tmp_path):
    first = rendered(tmp_path, "0.1.0", "1.0", "info")
    second = rendered(tmp_path, "0.2.0", "1.1", "debug")  # chart version, image and configuration
    third = rendered(tmp_path, "0.2.0", "1.1", "warning")  # configuration alone
    sts = StatefulSetDouble(
        cluster, NAMESPACE, NODE, OLD, 2, tmp_path, node_args=FAST, statefulset=first.get("StatefulSet", NODE)
    )
    replicas = StatefulSetDouble(
        cluster, NAMESPACE, REPLICA, OLD, 2, tmp_path, node_args=FAST, statefulset=first.get("StatefulSet", REPLICA)
    )
    assert sts.statefulset()["spec"]["updateStrategy"]["rollingUpdate"]["partition"] == 2  # as rendered
    assert replicas.statefulset()["spec"]["updateStrategy"]["rollingUpdate"]["partition"] == 2
    await asyncio.gather(sts.start(), replicas.start())
    try:
        await start_operator()
        await create_network(cluster, network_body(first))
        await eventually(lambda: network_status(cluster, NETWORK).get("currentVersion") == "1.0", 60, "1.0")
        assert sts.replaced == [] and replicas.replaced == []

        # The next release: a member and a read replica fail their readiness gates first, then the render lands.
        sts.set_ready(0, False)
        replicas.set_ready(0, False)
        helm_upgrade(sts, second)
        helm_upgrade(replicas, second)
        await patch_network(cluster, NETWORK, {"spec": {"version": "1.1"}})

        def upgraded() -> bool:
            status = network_status(cluster, NETWORK)
            return status.get("currentVersion") == "1.1" and status["upgrade"]["phase"] == "Completed"

        order, most_down, since = await held_then_rolled(cluster, sts, 0, upgraded, replicas)
        assert order == [f"{NODE}-1", f"{NODE}-0"] and most_down <= 1
        order, most_down = await replicas_rolled(cluster, replicas, 0, since)
        assert order == [f"{REPLICA}-1", f"{REPLICA}-0"] and most_down <= 1
        assert [replicas.pod_image(i) for i in range(2)] == [NEW, NEW]
        assert "replicaRollout" not in network_status(cluster, NETWORK)  # the release record goes at the end
        revision, image = sts.template()
        assert image == NEW and [sts.pod_revision(i) for i in range(2)] == [revision, revision]
        progress = network_status(cluster, NETWORK)["upgrade"]
        # The snapshot was taken before the first release, and is a ChainSnapshot to restore from.
        assert progress["snapshot"]["name"] in live(cluster, SNAPSHOTS, NAMESPACE), progress
        assert progress["revision"] == revision and progress["fromImage"] == OLD
        assert sts.statefulset()["spec"]["updateStrategy"]["rollingUpdate"]["partition"] == 2  # held again

        # A render that changes the configuration alone: the ChainNetwork does not change at all. The replicas
        # pass their gates this time: they wait for the nodes all the same.
        sts.set_ready(1, False)
        helm_upgrade(sts, third)
        helm_upgrade(replicas, third)
        assert network_status(cluster, NETWORK)["upgrade"]["revision"] == revision

        def reconfigured() -> bool:
            progress = network_status(cluster, NETWORK)["upgrade"]
            return bool(progress["phase"] == "Completed" and progress["revision"] == sts.template()[0])

        order, most_down, since = await held_then_rolled(cluster, sts, 1, reconfigured, replicas)
        assert order == [f"{NODE}-1", f"{NODE}-0"] and most_down <= 1
        order, most_down = await replicas_rolled(cluster, replicas, None, since)
        assert order == [f"{REPLICA}-1", f"{REPLICA}-0"] and most_down <= 1
        assert [sts.pod_image(i) for i in range(2)] == [NEW, NEW]
        assert [sts.pod_revision(i) for i in range(2)] == [sts.template()[0]] * 2 != [revision] * 2
        assert cluster.objects[NETWORKS, NAMESPACE, NETWORK].raw["spec"]["version"] == "1.1"
    finally:
        await asyncio.gather(sts.stop(), replicas.stop())
