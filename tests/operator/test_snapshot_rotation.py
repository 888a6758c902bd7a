"""Scheduled snapshots spread over the members: kopf against kmock, three real nodes' AdminServices. The
operator takes each snapshot on the pod after the last one's, and keeps at most `perMember` on one pod's
volume (beyond the network's retention)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from chain.v1 import rpc_pb2
from tests.fixtures.kubecluster import SNAPSHOTS, StatefulSetDouble, live
from tests.operator.conftest import NAMESPACE, create_network, eventually, network

PODS = ["chain-node-0", "chain-node-1", "chain-node-2"]


class Seen:
    """Every ChainSnapshot seen live (pruned ones too, once seen), by name: (createdAt, pod)."""

    def __init__(self, cluster: Any) -> None:
        self.cluster = cluster
        self.objs: dict[str, tuple[str, str]] = {}

    def pods(self) -> list[str]:
        for name, obj in live(self.cluster, SNAPSHOTS, NAMESPACE).items():
            self.objs[name] = (str(obj["spec"]["createdAt"]), str(obj["spec"]["pod"]))
        return [pod for _, pod in sorted(self.objs.values())]


async def test_snapshots_rotate_over_the_pods_and_each_volume_keeps_per_member(cluster, start_operator, tmp_path):
    sts = StatefulSetDouble(cluster, NAMESPACE, "chain-node", "registry.test/chain-node:1.0", 3, tmp_path)
    await sts.start()
    try:
        await start_operator()
        body = network("main", "1.0", 3, every="1s", retention=4)
        body["spec"]["snapshots"]["perMember"] = 1
        await create_network(cluster, body)

        seen = Seen(cluster)
        await eventually(lambda: len(seen.pods()) >= 6, 90, "six snapshots")
        first = seen.pods()[:6]
        assert Counter(first) == Counter({pod: 2 for pod in PODS}), first  # each pod in turn, not always -0

        def per_pod() -> Counter[str]:
            return Counter(str(o["spec"]["pod"]) for o in live(cluster, SNAPSHOTS, NAMESPACE).values())

        await eventually(lambda: max(per_pod().values()) <= 1, 10, "one snapshot per pod kept")
        for i, node in sorted(sts.procs.items()):
            assert node is not None
            with node.client() as client:
                assert client.admin is not None
                on_disk = client.admin.ListSnapshots(rpc_pb2.ListSnapshotsRequest()).snapshots
            assert len(on_disk) <= 2, f"{PODS[i]} keeps {len(on_disk)} snapshots"  # one, and one being taken
    finally:
        await sts.stop()
