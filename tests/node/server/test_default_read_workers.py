"""chain-node without `--read-workers` sizes its read workers from the CPUs and memory it may use (the
default, -1: `auto_read_workers`); `--read-workers 0` or `CHAIN_NODE_READ_WORKERS=0` still means none, and
the chart's `CHAIN_NODE_CPU_LIMIT` bounds the count. The test suite's nodes pin `--read-workers 0`
(tests/fixtures/nodeproc.py); these start nodes with the node's own default."""

from __future__ import annotations

from pathlib import Path

import grpc

from chain.v1 import rpc_pb2, service_pb2_grpc
from node.server.config import parse_config
from node.server.readers.supervisor import WORKER_MODULE, read_worker_count
from node.server.write.sizing import Resources, verify_worker_count
from tests.fixtures.nodeproc import NodeProcess
from tests.fixtures.procs import children_running, wait_until


def sized(cpu_limit: float = 0.0) -> int:
    """The read workers a node started from this process's cgroup and affinity picks by default."""
    res = Resources.detect(cpu_limit)
    return read_worker_count(-1, res, verify_worker_count(-1, res))


def test_the_default_is_sized_and_zero_still_means_none() -> None:
    assert parse_config([], env={}).read_workers == -1
    assert parse_config(["--read-workers", "0"], env={}).read_workers == 0
    assert parse_config([], env={"CHAIN_NODE_READ_WORKERS": "0"}).read_workers == 0
    res = Resources(2.0, None, "affinity")
    assert read_worker_count(parse_config([], env={}).read_workers, res, verify_worker_count(-1, res)) == 2


def _started_with(node: NodeProcess, want: int) -> None:
    assert node.proc is not None
    assert len(children_running(node.proc.pid, WORKER_MODULE)) == want
    # the count and what bounded it, logged before the ready line
    assert wait_until(lambda: any(f"read workers: {want} (" in line for line in node.stderr_lines), timeout=30)
    with grpc.insecure_channel(node.grpc_target) as channel:  # a read, through a worker when there are any
        stub = service_pb2_grpc.ChainServiceStub(channel)
        stub.GetChainStats(rpc_pb2.GetChainStatsRequest(), timeout=20)  # answered OK (raises otherwise)


def test_a_node_with_default_flags_sizes_its_read_workers(tmp_path: Path) -> None:
    node = NodeProcess(tmp_path / "data", read_workers=None).start(timeout=120)
    try:
        _started_with(node, sized())
    finally:
        node.stop()


def test_the_charts_cpu_limit_of_one_leaves_the_main_process_alone(tmp_path: Path) -> None:
    assert sized(1.0) == 0
    node = NodeProcess(tmp_path / "data", read_workers=None, env={"CHAIN_NODE_CPU_LIMIT": "1"}).start(timeout=120)
    try:
        _started_with(node, 0)
        assert any("read workers: 0 (1 CPUs by --cpu-limit" in line for line in node.stderr_lines)
    finally:
        node.stop()
