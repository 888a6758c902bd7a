"""Digest-pinned images: the operator compares and rolls by the full reference, digest included."""

from __future__ import annotations

from tests.fixtures.kubecluster import StatefulSetDouble
from tests.operator.conftest import NAMESPACE, create_network, eventually, network, network_status, patch_network

REPO = "registry.test/chain-node"
OLD, NEW = "sha256:" + "1" * 64, "sha256:" + "2" * 64


async def test_a_digest_pinned_install_is_not_rolled_and_a_digest_bump_rolls(cluster, start_operator, tmp_path):
    # As the chart renders a pinned install: repo@digest in the StatefulSet, the tag only in spec.version.
    sts = StatefulSetDouble(cluster, NAMESPACE, "chain-node", f"{REPO}@{OLD}", 2, tmp_path)
    await sts.start()
    try:
        await start_operator()
        await create_network(cluster, network("main", "1.0", 2, digest=OLD))
        await eventually(lambda: network_status(cluster, "main").get("currentVersion") == "1.0", 30, "1.0 recorded")
        assert sts.replaced == []
        template = sts.statefulset()["spec"]["template"]["spec"]["containers"][0]["image"]
        assert template == f"{REPO}@{OLD}"
        assert "upgrade" not in network_status(cluster, "main")

        # Same tag, new digest: a new image, rolled one pod at a time.
        await patch_network(cluster, "main", {"spec": {"digest": NEW}})
        await eventually(lambda: network_status(cluster, "main").get("upgrade", {}).get("phase") == "Completed", 120)
        assert sts.replaced == [("chain-node-1", f"{REPO}@{NEW}"), ("chain-node-0", f"{REPO}@{NEW}")]
        status = network_status(cluster, "main")
        assert status["upgrade"]["fromImage"] == f"{REPO}@{OLD}"
        assert status["upgrade"]["image"] == f"{REPO}@{NEW}"
    finally:
        await sts.stop()
