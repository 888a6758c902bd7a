"""Rollout gates (chain_operator/gates.py) end to end: kopf against kmock, pods that are real chain-node
processes. Each test holds the rollout with one gate; each fails when that gate alone is removed."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from chain.v1 import rpc_pb2
from tests.fixtures.kubecluster import StatefulSetDouble
from tests.fixtures.nodeproc import NodeProcess
from tests.fixtures.procs import free_port
from tests.operator.conftest import NAMESPACE, create_network, eventually, network, network_status, patch_network

OLD = "registry.test/chain-node:1.0"
FAST = ["--empty-block-interval", "0.1"]


def upgrading(k) -> dict[str, Any]:
    conds = network_status(k, "main").get("conditions", [])
    return next((c for c in conds if c["type"] == "Upgrading"), {})


def height(sts: StatefulSetDouble, ordinal: int) -> int:
    proc = sts.procs[ordinal]
    assert proc is not None
    with proc.client() as c:
        return int(c.stub.GetNodeStatus(rpc_pb2.GetNodeStatusRequest()).status.block_height)


async def begin_upgrade(cluster, start_operator, sts: StatefulSetDouble, lag: int = 0, **config: Any) -> None:
    """Start the pods and the operator, record 1.0, wait until chain-node-0 is `lag` blocks behind
    chain-node-1 (when asked), then ask for 1.1."""
    await sts.start()
    await start_operator(**config)
    await create_network(cluster, network("main", "1.0", 2))
    await eventually(lambda: network_status(cluster, "main").get("currentVersion") == "1.0", 30, "1.0 recorded")
    if lag:
        await eventually(lambda: height(sts, 1) - height(sts, 0) > lag, 60, f"chain-node-0 {lag} blocks behind")
    await patch_network(cluster, "main", {"spec": {"version": "1.1"}})


async def assert_held(cluster, sts: StatefulSetDouble, reason: str) -> None:
    """The rollout says why it holds, and keeps holding: no pod released, nothing failed."""
    await eventually(lambda: upgrading(cluster).get("reason") == reason, 30, f"Upgrading reason {reason}")
    await asyncio.sleep(3.0)
    cond = upgrading(cluster)
    assert cond["status"] == "True" and cond["reason"] == reason, cond
    assert "holding before releasing chain-node-1: chain-node-0" in cond["message"]
    assert sts.statefulset()["spec"]["updateStrategy"]["rollingUpdate"]["partition"] == 2
    assert sts.replaced == []
    assert network_status(cluster, "main")["upgrade"]["phase"] == "Progressing"


async def test_a_member_that_is_not_ready_holds_the_rollout_until_it_is(cluster, start_operator, tmp_path):
    sts = StatefulSetDouble(cluster, NAMESPACE, "chain-node", OLD, 2, tmp_path, node_args=FAST)
    try:
        await begin_upgrade(cluster, start_operator, sts)
        sts.set_ready(0, False)  # its readiness probe fails; the process still serves and keeps up
        await assert_held(cluster, sts, "MemberNotReady")
        sts.set_ready(0, True)
        await eventually(lambda: network_status(cluster, "main").get("currentVersion") == "1.1", 120, "1.1")
        assert [name for name, _ in sts.replaced] == ["chain-node-1", "chain-node-0"]
    finally:
        await sts.stop()


async def test_a_lagging_member_holds_the_rollout(cluster, start_operator, tmp_path):
    # chain-node-0 makes an empty block every 30 s, chain-node-1 every 0.1 s: 0 falls behind at once.
    slow = {0: ["--empty-block-interval", "30"]}
    sts = StatefulSetDouble(cluster, NAMESPACE, "chain-node", OLD, 2, tmp_path, node_args=FAST, ordinal_args=slow)
    try:
        await begin_upgrade(cluster, start_operator, sts, lag=20, max_lag_blocks=5)
        await assert_held(cluster, sts, "MemberLagging")
        assert "blocks behind the leader (max 5)" in upgrading(cluster)["message"]
    finally:
        await sts.stop()


async def test_a_not_serving_member_holds_the_rollout(cluster, start_operator, tmp_path):
    # chain-node-0 restarts as a read replica of an address nobody listens on: Ready and answering
    # GetNodeStatus, but NOT_SERVING on grpc.health.v1. (The lag gate is wide open: only SERVING can hold.)
    data = tmp_path / "chain-node-0"
    await asyncio.to_thread(lambda: NodeProcess(data, "--web-addr", "", "--verify-workers", "0").start().stop())
    dead = {0: ["--follow", f"127.0.0.1:{free_port()}"]}
    sts = StatefulSetDouble(cluster, NAMESPACE, "chain-node", OLD, 2, tmp_path, ordinal_args=dead)
    try:
        await begin_upgrade(cluster, start_operator, sts)
        await assert_held(cluster, sts, "MemberNotServing")
    finally:
        await sts.stop()


async def test_a_flapping_member_never_passes_the_stabilisation_window(cluster, start_operator, tmp_path):
    # chain-node-0 is Ready for 0.25 s out of every 1.25 s: any single check may pass, but three checks in a
    # row spaced 0.4 s apart never can.
    sts = StatefulSetDouble(cluster, NAMESPACE, "chain-node", OLD, 2, tmp_path, node_args=FAST)

    async def flap() -> None:
        while True:
            sts.set_ready(0, True)
            await asyncio.sleep(0.25)
            sts.set_ready(0, False)
            await asyncio.sleep(1.0)

    flapper: asyncio.Task[None] | None = None
    try:
        await begin_upgrade(cluster, start_operator, sts, stable_checks=3, stable_interval=0.4)
        flapper = asyncio.create_task(flap())
        await asyncio.sleep(8.0)
        assert sts.statefulset()["spec"]["updateStrategy"]["rollingUpdate"]["partition"] == 2
        assert sts.replaced == []
        assert upgrading(cluster)["reason"] == "MemberNotReady"
    finally:
        if flapper is not None:
            flapper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await flapper
        await sts.stop()
