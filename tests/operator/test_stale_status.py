"""`upgrade.step` handed a stale ChainNetwork status (one read from before its own last write): the upgrade
must still wait for the last pod. The soak run of test_upgrade_under_load.py found it: a step that read the
status of the previous, completed upgrade carried its image on (and wrote it back), so once the partition
reached 0 the upgrade was recorded complete while chain-node-0 was still being replaced."""

from __future__ import annotations

import kopf

from chain_operator.conditions import ConditionReason
from chain_operator.config import OperatorConfig
from chain_operator.kube import KubeApi
from chain_operator.spec import Network, parse_spec
from chain_operator.upgrade import Phase, UpgradeProgress, step
from tests.fixtures.kubecluster import PODS, STATEFULSETS, StatefulSetDouble
from tests.operator.conftest import NAMESPACE, network

OLD, NEW = "registry.test/chain-node:1.1", "registry.test/chain-node:1.2"
# What the previous upgrade (1.0 -> 1.1) left in the status: completed.
STALE = UpgradeProgress(
    version="1.1", image=OLD, from_image="registry.test/chain-node:1.0", phase=Phase.COMPLETED, partition=0
)


def set_statefulset(sts: StatefulSetDouble, image: str, partition: int) -> None:
    body = sts.statefulset()
    body["spec"]["template"]["spec"]["containers"][0]["image"] = image
    body["spec"]["updateStrategy"]["rollingUpdate"]["partition"] = partition
    sts.k.objects[STATEFULSETS, NAMESPACE, sts.name] = body


async def test_a_release_read_from_a_stale_status_still_waits_for_the_last_pod(cluster, tmp_path):
    sts = StatefulSetDouble(cluster, NAMESPACE, "chain-node", OLD, 2, tmp_path)
    kube = KubeApi(kopf.ConnectionInfo(server=str(cluster.url)))
    config = OperatorConfig(
        namespaces=(NAMESPACE,), max_lag_blocks=1_000_000, stable_checks=1, rpc_timeout=5.0, rollout_snapshot=False
    )
    net = Network(NAMESPACE, "main", "uid-main", parse_spec(network("main", "1.2", 2)["spec"]))
    try:
        await sts.start()
        await sts.hold()  # the pods stay on 1.1: only what `step` decides moves the partition
        # `begin` ran (new template, every pod held) but the status read back is still the old one.
        set_statefulset(sts, NEW, 2)
        released = await step(kube, config, net, {"upgrade": STALE.to_status()})
        progress = UpgradeProgress.from_status(released.status["upgrade"])
        assert (progress.partition, progress.image, progress.version) == (1, NEW, "1.2")
        assert progress.running(NEW) and progress.from_image == OLD
        # No upgrade status at all (begin's write not seen yet): the image it came from is ordinal 0's.
        waiting = await step(kube, config, net, {})
        assert not waiting.done
        assert UpgradeProgress.from_status(waiting.status["upgrade"]).from_image == OLD
        # The partition reaches 0 while chain-node-0 still runs 1.1 (its replacement has not started), and the
        # status read is stale again: it must wait for chain-node-0, and write the upgrade in progress back.
        set_statefulset(sts, NEW, 0)
        last = await step(kube, config, net, {"upgrade": STALE.to_status()})
        assert not last.done
        assert "currentVersion" not in last.status
        (cond,) = last.conditions
        assert cond.reason == ConditionReason.WAITING_FOR_POD and f"it still runs {OLD}" in cond.message
        adopted = UpgradeProgress.from_status(last.status["upgrade"])
        assert adopted.running(NEW) and adopted.from_image == OLD
        assert cluster.objects[PODS, NAMESPACE, "chain-node-0"].raw["spec"]["containers"][0]["image"] == OLD
    finally:
        await kube.close()
        await sts.stop()
