"""A render applied during a rollout (helm upgrade, a GitOps sync) sets the partition back to `replicas`: every pod
is held again. The operator's next step takes it straight back down to where every pod above is current and
releases the next pod, instead of releasing again a pod that already runs the template (upgrade.lower_to)."""

from __future__ import annotations

import kopf

from chain_operator.config import OperatorConfig
from chain_operator.kube import KubeApi
from chain_operator.spec import Network, parse_spec
from chain_operator.upgrade import Phase, UpgradeProgress, step
from tests.fixtures.kubecluster import STATEFULSETS, StatefulSetDouble
from tests.operator.conftest import NAMESPACE, eventually, network

OLD, NEW = "registry.test/chain-node:1.0", "registry.test/chain-node:1.1"


def set_partition(sts: StatefulSetDouble, partition: int, image: str = "") -> None:
    body = sts.statefulset()
    if image:
        body["spec"]["template"]["spec"]["containers"][0]["image"] = image
    body["spec"]["updateStrategy"]["rollingUpdate"]["partition"] = partition
    sts.k.objects[STATEFULSETS, NAMESPACE, sts.name] = body


async def test_a_render_mid_rollout_is_taken_back_to_where_the_rollout_was(cluster, tmp_path):
    sts = StatefulSetDouble(
        cluster, NAMESPACE, "chain-node", OLD, 2, tmp_path, node_args=["--empty-block-interval", "0.1"]
    )
    kube = KubeApi(kopf.ConnectionInfo(server=str(cluster.url)))
    config = OperatorConfig(
        namespaces=(NAMESPACE,), max_lag_blocks=1_000_000, stable_checks=1, rpc_timeout=5.0, rollout_snapshot=False
    )
    net = Network(NAMESPACE, "main", "uid-main", parse_spec(network("main", "1.1", 2)["spec"]))
    try:
        await sts.start()
        # The rollout released chain-node-1 (partition 1) and it came back at the template.
        set_partition(sts, 1, NEW)
        revision = sts.template()[0]
        await eventually(lambda: sts.pod_revision(1) == revision and sts.procs.get(1) is not None, 60, "pod 1")
        released = UpgradeProgress(
            version="1.1", image=NEW, from_image=OLD, phase=Phase.PROGRESSING, partition=1, pod="chain-node-1"
        )
        released = UpgradeProgress.from_status({**released.to_status(), "revision": revision})
        await sts.hold()  # from here only the operator's patches move the partition
        set_partition(sts, 2)  # the render: every pod held again
        moved = await step(kube, config, net, {"upgrade": released.to_status()})
        progress = UpgradeProgress.from_status(moved.status["upgrade"])
        # chain-node-1 is current: the step goes back to partition 1 and releases chain-node-0, not chain-node-1.
        assert (progress.partition, progress.pod) == (0, "chain-node-0"), progress
        assert sts.statefulset()["spec"]["updateStrategy"]["rollingUpdate"]["partition"] == 0
        assert sts.replaced == [("chain-node-1", NEW)]
    finally:
        await kube.close()
        await sts.stop()
