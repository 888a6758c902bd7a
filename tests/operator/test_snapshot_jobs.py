"""Snapshot jobs followed by the operator: kopf against kmock, jobs run by a real node's AdminService.

The node's test hook CHAIN_TEST_SNAPSHOT_HOLD names a file: while it exists, the node's copy waits before it
is published (a store too big to copy between two ticks). The operator's metrics are read from its real
HTTP endpoint.
"""

from __future__ import annotations

import asyncio
import urllib.request
from pathlib import Path
from typing import Any

import grpc
from prometheus_client.parser import text_string_to_metric_families

from chain.v1 import admin_service_pb2 as pb
from chain.v1 import admin_service_pb2_grpc
from tests.fixtures.kubecluster import SNAPSHOTS, StatefulSetDouble, ever_created
from tests.fixtures.nodeproc import NodeProcess
from tests.fixtures.procs import free_port
from tests.operator.conftest import NAMESPACE, create_network, eventually, network, network_status

HOLD_ENV = "CHAIN_TEST_SNAPSHOT_HOLD"
LABELS = {"namespace": NAMESPACE, "network": "main"}


def node_jobs(node: NodeProcess | None) -> list[pb.SnapshotJob]:
    assert node is not None
    stub = admin_service_pb2_grpc.AdminServiceStub(grpc.insecure_channel(node.admin_target))
    return list(stub.ListSnapshotJobs(pb.ListSnapshotJobsRequest(), timeout=10).jobs)


def job_status(cluster: Any) -> dict[str, Any]:
    job: dict[str, Any] = network_status(cluster, "main").get("snapshots", {}).get("job", {})
    return job


async def scrape(port: int) -> dict[str, float]:
    """name -> value of the samples labelled with the test network."""

    def get() -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
            return str(resp.read().decode())

    text = await asyncio.to_thread(get)
    return {
        s.name: s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if LABELS.items() <= s.labels.items()
    }


def taken(cluster: Any) -> set[str]:
    return ever_created(cluster, SNAPSHOTS, NAMESPACE)


async def test_a_job_is_polled_across_ticks_and_an_operator_restart_resumes_it(cluster, start_operator, tmp_path):
    hold = tmp_path / "hold"
    hold.touch()
    sts = StatefulSetDouble(
        cluster, NAMESPACE, "chain-node", "registry.test/chain-node:1.0", 1, tmp_path, node_env={HOLD_ENV: str(hold)}
    )
    await sts.start()
    try:
        port = free_port()
        stop = await start_operator(metrics_addr=f"127.0.0.1:{port}")  # ticks every 0.3 s
        await create_network(cluster, network("main", "1.0", 1, every="1h", retention=3))

        job = await eventually(lambda: job_status(cluster).get("state") == "Running" and job_status(cluster), 30)
        assert job["pod"] == "chain-node-0"
        await asyncio.sleep(2.0)  # several ticks poll the same job; none starts another or records a snapshot
        assert job_status(cluster)["id"] == job["id"] and job_status(cluster)["state"] == "Running"
        assert [j.id for j in node_jobs(sts.procs[0])] == [job["id"]]
        assert taken(cluster) == set()
        metrics = await scrape(port)
        assert metrics["chain_operator_snapshot_job_running"] == 1
        assert metrics["chain_operator_snapshot_failures_total"] == 0

        await stop()  # the operator goes away mid-job; the copy goes on and finishes meanwhile
        hold.unlink()
        await eventually(lambda: node_jobs(sts.procs[0])[0].state == pb.SNAPSHOT_JOB_STATE_SUCCEEDED, 30)

        port = free_port()
        await start_operator(metrics_addr=f"127.0.0.1:{port}")
        await eventually(lambda: job_status(cluster).get("state") == "Succeeded", 30, "the recorded job polled")
        # It polled the recorded id: the node ran one job, and one ChainSnapshot records it.
        (only,) = node_jobs(sts.procs[0])
        assert only.id == job["id"]
        (name,) = taken(cluster)
        status = network_status(cluster, "main")
        assert status["snapshots"]["last"] == name and status["snapshots"]["job"]["snapshot"] == only.snapshot.name
        assert status["snapshots"]["lastBlock"] == only.snapshot.block_number
        await asyncio.sleep(1.0)  # not due again for an hour
        assert taken(cluster) == {name} and len(node_jobs(sts.procs[0])) == 1
        metrics = await scrape(port)
        assert metrics["chain_operator_snapshot_last_success_timestamp_seconds"] >= only.finished_at - 1
        assert metrics["chain_operator_snapshot_job_running"] == 0
    finally:
        hold.unlink(missing_ok=True)
        await sts.stop()


async def test_a_failing_job_counts_and_the_schedule_retries_without_multiplying_snapshots(
    cluster, start_operator, tmp_path
):
    # The node's snapshot directory lies under a regular file: every copy fails until the file goes.
    blocker = tmp_path / "blocker"
    blocker.write_text("not a directory\n")
    snapshot_dir = blocker / "snapshots"
    sts = StatefulSetDouble(
        cluster,
        NAMESPACE,
        "chain-node",
        "registry.test/chain-node:1.0",
        1,
        tmp_path / "pods",
        node_args=["--snapshot-dir", str(snapshot_dir)],
    )
    await sts.start()
    try:
        port = free_port()
        await start_operator(metrics_addr=f"127.0.0.1:{port}")
        await create_network(cluster, network("main", "1.0", 1, every="1h", retention=3))

        def failures() -> int:
            return int(network_status(cluster, "main").get("snapshots", {}).get("failures", 0))

        await eventually(lambda: failures() >= 2, 30, "two failed jobs")
        conds = network_status(cluster, "main")["conditions"]
        (cond,) = [c for c in conds if c["type"] == "SnapshotsReady"]
        assert cond["status"] == "False" and cond["reason"] == "SnapshotJobFailed"
        assert "STORAGE_FAILED" in cond["message"]
        assert taken(cluster) == set()
        metrics = await scrape(port)
        assert metrics["chain_operator_snapshot_failures_total"] >= 2
        assert "chain_operator_snapshot_last_success_timestamp_seconds" not in metrics

        blocker.unlink()  # the next job succeeds; the schedule advances and nothing more is taken
        await eventually(lambda: taken(cluster), 30, "a snapshot after the failures")
        await asyncio.sleep(2.0)
        assert len(taken(cluster)) == 1
        assert len([d for d in snapshot_dir.iterdir() if d.name.startswith("snap-")]) == 1
        assert network_status(cluster, "main")["snapshots"]["job"]["state"] == "Succeeded"
        failed = (await scrape(port))["chain_operator_snapshot_failures_total"]
        assert failed == failures() >= 2  # counted once per failed job, in the status and the metric alike
    finally:
        await sts.stop()


async def test_a_job_lost_with_a_node_restart_counts_as_failed_and_is_retried(cluster, start_operator, tmp_path):
    hold = tmp_path / "hold"
    hold.touch()
    sts = StatefulSetDouble(
        cluster, NAMESPACE, "chain-node", "registry.test/chain-node:1.0", 1, tmp_path, node_env={HOLD_ENV: str(hold)}
    )
    await sts.start()
    try:
        await start_operator()
        await create_network(cluster, network("main", "1.0", 1, every="1h", retention=3))
        first = await eventually(lambda: job_status(cluster).get("state") == "Running" and job_status(cluster), 30)

        await sts.crash(0)  # kill -9 mid-copy; the node comes back without the job
        second = await eventually(
            lambda: job_status(cluster).get("id") not in ("", first["id"]) and job_status(cluster), 30, "a new job"
        )
        assert second["state"] == "Running"
        assert network_status(cluster, "main")["snapshots"]["failures"] == 1
        assert taken(cluster) == set()

        hold.unlink()
        await eventually(lambda: taken(cluster), 30, "the retried snapshot")
        await asyncio.sleep(1.0)
        assert len(taken(cluster)) == 1
        snapshots = Path(tmp_path / "chain-node-0" / "snapshots")
        assert sorted(d.name for d in snapshots.iterdir() if not d.name.startswith("snap-")) == []
        assert network_status(cluster, "main")["snapshots"]["failures"] == 1
    finally:
        hold.unlink(missing_ok=True)
        await sts.stop()
