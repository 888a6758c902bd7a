"""The snapshot every rollout takes before its first release (chain_operator/rollout_snapshot.py): while it
cannot be taken nothing is released; once it is, it is recorded in `status.upgrade.snapshot` and the rollout goes
on. Fails when the hold on a failed snapshot is removed (the pods are then replaced without one)."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.fixtures.kubecluster import SNAPSHOTS, StatefulSetDouble, live
from tests.operator.conftest import NAMESPACE, create_network, eventually, network, network_status, patch_network

OLD, NEW = "registry.test/chain-node:1.0", "registry.test/chain-node:1.1"


def upgrading(k: Any) -> dict[str, Any]:
    return next((c for c in network_status(k, "main").get("conditions", []) if c["type"] == "Upgrading"), {})


async def test_no_pod_is_released_until_the_snapshot_before_the_rollout_is_taken(cluster, start_operator, tmp_path):
    # Every member's snapshot directory lies under a regular file: every snapshot job fails until the file goes.
    blocker = tmp_path / "blocker"
    blocker.write_text("not a directory\n")
    args = ["--empty-block-interval", "0.1", "--snapshot-dir", str(blocker / "snapshots")]
    sts = StatefulSetDouble(cluster, NAMESPACE, "chain-node", OLD, 2, tmp_path / "pods", node_args=args)
    await sts.start()
    try:
        await start_operator()
        await create_network(cluster, network("main", "1.0", 2))
        await eventually(lambda: network_status(cluster, "main").get("currentVersion") == "1.0", 30, "1.0 recorded")
        await patch_network(cluster, "main", {"spec": {"version": "1.1"}})

        await eventually(
            lambda: sts.replaced or upgrading(cluster).get("reason") == "SnapshotJobFailed", 60, "a failed snapshot"
        )
        await asyncio.sleep(3.0)  # the hold lasts: nothing is released without the snapshot
        assert sts.replaced == []
        assert sts.statefulset()["spec"]["updateStrategy"]["rollingUpdate"]["partition"] == 2
        cond = upgrading(cluster)
        assert cond["status"] == "True" and "the snapshot before the rollout failed" in cond["message"], cond
        assert "STORAGE_FAILED" in network_status(cluster, "main")["upgrade"]["snapshot"]["error"]

        blocker.unlink()  # the next job succeeds: recorded, then the pods go one at a time
        await eventually(lambda: network_status(cluster, "main").get("currentVersion") == "1.1", 120, "1.1")
        assert [pod for pod, _ in sts.replaced] == ["chain-node-1", "chain-node-0"]
        snapshot = network_status(cluster, "main")["upgrade"]["snapshot"]
        assert snapshot["name"] in live(cluster, SNAPSHOTS, NAMESPACE) and snapshot["block"] >= 1, snapshot
        assert snapshot["error"] == ""
    finally:
        await sts.stop()
