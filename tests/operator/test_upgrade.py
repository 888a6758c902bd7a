"""Rolling upgrades end to end: kopf against kmock, pods that are real chain-node processes."""

from __future__ import annotations

from typing import Any

import pytest

from chain.v1 import rpc_pb2
from chain_operator.gates import Member
from chain_operator.nodes import PodView
from chain_operator.spec import Network, parse_spec
from chain_operator.upgrade import why_not_done
from tests.fixtures.kubecluster import NETWORKS, StatefulSetDouble
from tests.operator.conftest import NAMESPACE, create_network, eventually, network, network_status, patch_network

OLD, NEW = "registry.test/chain-node:1.0", "registry.test/chain-node:1.1"


def condition(k, name: str, type_: str) -> dict[str, Any] | None:
    return next((c for c in network_status(k, name).get("conditions", []) if c["type"] == type_), None)


@pytest.mark.parametrize("replicas", [2, pytest.param(3, marks=pytest.mark.soak)])
async def test_upgrade_replaces_one_pod_at_a_time_highest_ordinal_first(cluster, start_operator, tmp_path, replicas):
    fast = ["--empty-block-interval", "0.1"]
    sts = StatefulSetDouble(cluster, NAMESPACE, "chain-node", OLD, replicas, tmp_path, node_args=fast)
    await sts.start()
    try:
        halt = await start_operator()
        await create_network(cluster, network("main", "1.0", replicas))
        await eventually(lambda: network_status(cluster, "main").get("currentVersion") == "1.0", 30, "1.0 recorded")
        assert sts.replaced == []

        # Watch the pods while the upgrade runs: never more than one of them down at a time.
        await patch_network(cluster, "main", {"spec": {"version": "1.1"}})
        most_down = 0

        def finished() -> bool:
            nonlocal most_down
            down = sum(1 for i in range(replicas) if sts.procs.get(i) is None)
            most_down = max(most_down, down)
            return network_status(cluster, "main").get("currentVersion") == "1.1"

        await eventually(finished, 120, "the upgrade to 1.1")
        assert most_down <= 1
        assert sts.replaced == [(f"chain-node-{i}", NEW) for i in reversed(range(replicas))]
        assert [sts.pod_image(i) for i in range(replicas)] == [NEW] * replicas
        # Every pod held again (partition = replicas): the next template change waits for the operator.
        assert sts.statefulset()["spec"]["updateStrategy"]["rollingUpdate"]["partition"] == replicas

        status = network_status(cluster, "main")
        assert status["upgrade"]["phase"] == "Completed"
        assert status["upgrade"]["fromImage"] == OLD
        upgrading, ready = condition(cluster, "main", "Upgrading"), condition(cluster, "main", "Ready")
        assert upgrading is not None and upgrading["status"] == "False" and upgrading["reason"] == "Completed"
        assert ready is not None and ready["status"] == "True"
        # The last pod released (ordinal 0) was held until it reached the height the network had when it was
        # released. Only that pod: the doubles are independent solo chains, so a pod replaced earlier, which
        # lost blocks while it restarted, may still be below the highest pod's height (a race: it failed 2
        # runs in 4 before this check named the pod it is about).
        for i in range(replicas):
            assert sts.procs[i] is not None
        last = sts.procs[0]
        assert last is not None
        with last.client() as c:
            height = c.stub.GetNodeStatus(rpc_pb2.GetNodeStatusRequest()).status.block_height
        assert height >= status["upgrade"]["targetHeight"]

        # A restarted operator runs the upgrade handler again (kopf's resume): it keeps the record that the
        # upgrade completed. The Ready message is changed first so that its rewrite shows the handler ran.
        await halt()
        body = cluster.objects[NETWORKS, NAMESPACE, "main"].raw
        body["status"]["conditions"] = [
            {**c, "message": "before the restart"} if c["type"] == "Ready" else c for c in body["status"]["conditions"]
        ]
        cluster.objects[NETWORKS, NAMESPACE, "main"] = body
        await start_operator()
        await eventually(
            lambda: (condition(cluster, "main", "Ready") or {}).get("message") == "version 1.1", 30, "resume"
        )
        assert condition(cluster, "main", "Upgrading") == upgrading
        assert network_status(cluster, "main")["upgrade"] == status["upgrade"]
    finally:
        await sts.stop()


async def test_a_pod_that_never_comes_back_stops_the_upgrade_with_a_condition(cluster, start_operator, tmp_path):
    sts = StatefulSetDouble(cluster, NAMESPACE, "chain-node", OLD, 2, tmp_path, crashing_tags={"1.1"})
    await sts.start()
    try:
        await start_operator(pod_timeout=10.0)
        await create_network(cluster, network("main", "1.0", 2))
        await eventually(lambda: network_status(cluster, "main").get("currentVersion") == "1.0", 30, "1.0 recorded")

        await patch_network(cluster, "main", {"spec": {"version": "1.1"}})

        def stopped() -> bool:
            cond = condition(cluster, "main", "Upgrading")
            return cond is not None and cond["status"] == "False" and cond["reason"] == "UpgradeFailed"

        await eventually(stopped, 60, "Upgrading=False/UpgradeFailed")
        cond = condition(cluster, "main", "Upgrading")
        assert cond is not None
        assert "pod chain-node-1 did not come back within 10s" in cond["message"]
        ready = condition(cluster, "main", "Ready")
        assert ready is not None and ready["status"] == "False" and ready["reason"] == "UpgradeFailed"
        status = network_status(cluster, "main")
        assert status["upgrade"]["phase"] == "Failed"
        assert status["currentVersion"] == "1.0"

        # The failed pod is the only one touched: pod 0 still runs the old version and still serves.
        assert sts.statefulset()["spec"]["updateStrategy"]["rollingUpdate"]["partition"] == 1
        await eventually(lambda: sts.replaced, 30, "the crashing pod to settle")
        assert sts.replaced == [("chain-node-1", NEW)]
        assert sts.procs[1] is None
        assert sts.pod_image(0) == OLD
        survivor = sts.procs[0]
        assert survivor is not None
        with survivor.client() as c:
            assert c.stub.GetNodeStatus(rpc_pb2.GetNodeStatusRequest()).status.block_height >= 1
    finally:
        await sts.stop()


async def test_an_invalid_spec_is_refused_with_a_condition(cluster, start_operator, tmp_path):
    sts = StatefulSetDouble(cluster, NAMESPACE, "chain-node", OLD, 1, tmp_path)
    await sts.start()
    try:
        await start_operator()
        body = network("main", "1.0", 1)
        body["spec"]["snapshots"]["every"] = "every tuesday"
        await create_network(cluster, body)
        await eventually(lambda: condition(cluster, "main", "Ready"), 30, "a Ready condition")
        ready = condition(cluster, "main", "Ready")
        assert ready is not None and ready["status"] == "False" and ready["reason"] == "InvalidSpec"
        assert "snapshots.every" in ready["message"]
        assert sts.replaced == []
    finally:
        await sts.stop()


async def test_changing_replicas_scales_the_statefulset(cluster, start_operator, tmp_path):
    sts = StatefulSetDouble(cluster, NAMESPACE, "chain-node", OLD, 1, tmp_path)
    await sts.start()
    try:
        await start_operator()
        await create_network(cluster, network("main", "1.0", 1))
        await eventually(lambda: network_status(cluster, "main").get("currentVersion") == "1.0", 30, "1.0 recorded")
        await patch_network(cluster, "main", {"spec": {"replicas": 3}})
        await eventually(lambda: sts.statefulset()["spec"]["replicas"] == 3, 30, "the StatefulSet scaled to 3")
        # The hold follows: a pod added above the old partition would take the next template by itself.
        assert sts.statefulset()["spec"]["updateStrategy"]["rollingUpdate"]["partition"] == 3
    finally:
        await sts.stop()


def test_the_released_pod_is_held_until_it_reaches_the_network_height_at_its_release() -> None:
    """The height gate alone (test_upgrade.py's doubles are independent chains that rarely exercise it)."""
    net = Network("ns", "main", "uid", parse_spec({"statefulSet": "chain-node", "image": "i", "version": "1.1"}))

    def member(ordinal: int, height: int) -> Member:
        name = f"chain-node-{ordinal}"
        return Member(name, PodView(name, "127.0.0.1", True, "i:1.1", 1, 2), True, height)

    assert why_not_done(net, [member(0, 30), member(1, 31)], 0, 32, 10) == "it is at block 30, the network was at 32"
    assert why_not_done(net, [member(0, 32), member(1, 33)], 0, 32, 10) == ""
