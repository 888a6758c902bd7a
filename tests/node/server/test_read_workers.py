"""`chain-node --read-workers N`: worker processes answer reads on the node's gRPC port and relay
the rest to the main process. The port stays the node's alone (a second chain-node is refused, with or
without workers of its own, also when both start at once), worker RPC metrics reach the node's
Prometheus endpoint, streams and health answer through a worker, a killed worker is replaced, and a
killed main process leaves no worker behind."""

from __future__ import annotations

import asyncio
import errno
import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from chain.v1 import rpc_pb2, service_pb2_grpc
from node.errors import REASON_CODE, trailer
from node.observability.histogram import Histogram
from node.server.readers.sharing import lock_name
from node.server.readers.supervisor import WORKER_MODULE, ReadWorkers
from node.server.telemetry.node_metrics import MS_BUCKETS
from tests.fixtures.nodeproc import ROOT, NodeProcess
from tests.fixtures.procs import alive as _alive
from tests.fixtures.procs import children as _children
from tests.fixtures.procs import children_running, free_port
from tests.fixtures.procs import wait_until as _wait
from tests.fixtures.scrape import read_worker_calls, read_worker_lookups, scrape, value


def _workers(pid: int) -> set[int]:
    return children_running(pid, WORKER_MODULE)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return f"{pid} gone"


def _fresh_call(target: str) -> int:
    """GetNodeStatus on a new connection (the kernel picks the process for each connection)."""
    with grpc.insecure_channel(target, options=[("grpc.use_local_subchannel_pool", 1)]) as channel:
        stub = service_pb2_grpc.ChainServiceStub(channel)
        return int(stub.GetNodeStatus(rpc_pb2.GetNodeStatusRequest(), timeout=20).status.block_height)


def _fresh_read(target: str) -> bool:
    """GetAccount (a read the workers keep answers for) on a new connection."""
    with grpc.insecure_channel(target, options=[("grpc.use_local_subchannel_pool", 1)]) as channel:
        stub = service_pb2_grpc.ChainServiceStub(channel)
        stub.GetAccount(rpc_pb2.GetAccountRequest(owner_address=b"\x07" * 20), timeout=20)
    return True


def _looked_up(port: int) -> dict[str, float]:
    return {i: n for i, n in read_worker_lookups(port).items() if n > 0}


def _second_node(tmp_path: Path, grpc_addr: str, *extra: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "node.server.main", "--data-dir", str(tmp_path / "second")]
    cmd += ["--grpc-addr", grpc_addr, "--web-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0"]
    cmd += ["--internal-addr", "127.0.0.1:0"]
    cmd += ["--metrics-addr", "127.0.0.1:0", *extra]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run(cmd, check=False, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    node = NodeProcess(tmp_path_factory.mktemp("shared") / "data", "--read-workers", "2").start(timeout=120)
    yield node
    node.stop()


@pytest.mark.parametrize("workers", ["0", "2"])
def test_a_second_node_is_refused_on_the_port_of_a_node_with_read_workers(
    shared: NodeProcess, tmp_path: Path, workers: str
) -> None:
    done = _second_node(tmp_path, shared.grpc_target, "--read-workers", workers)
    assert done.returncode != 0 and done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "--grpc-addr" in lines[0] and shared.grpc_target in lines[0] and "already in use" in lines[0]
    assert not (tmp_path / "second" / "data.mdb").exists()
    with socket.socket() as plain:  # nor can any socket that did not ask to share the port
        with pytest.raises(OSError) as err:
            plain.bind(("127.0.0.1", shared.ready["grpc_port"]))
        assert err.value.errno == errno.EADDRINUSE
    assert _fresh_call(shared.grpc_target) >= 0  # the node still answers on its port


def test_two_nodes_starting_at_once_cannot_share_a_port(tmp_path: Path) -> None:
    """Both could pass the address check before either binds; the port lock, taken first, refuses one."""
    port = free_port()
    held = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    held.bind(lock_name(port))  # what the other node, starting at the same moment, holds
    try:
        done = _second_node(tmp_path, f"127.0.0.1:{port}", "--read-workers", "1")
    finally:
        held.close()
    assert done.returncode != 0 and done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "another chain-node holds this port" in lines[0], done.stderr


def test_worker_rpc_metrics_reach_the_prometheus_endpoint(shared: NodeProcess) -> None:
    """With read workers the main process takes no public connection: every call below is a worker's."""
    name = "rpc_server_duration_milliseconds_count"
    labels = {"rpc_method": "GetBlock", "rpc_service": "chain.v1.ChainService", "rpc_grpc_status_code": "0"}

    def count() -> float:
        samples = scrape(shared.ready["metrics_port"])
        return value(samples, name, **labels) if name in samples else 0.0

    def per_worker() -> dict[str, float]:  # chain.read_worker.calls: what each worker answered itself
        return read_worker_calls(shared.ready["metrics_port"])

    before, workers_before = count(), per_worker()
    assert set(workers_before) == {"0", "1"}
    for _ in range(8):
        with grpc.insecure_channel(shared.grpc_target, options=[("grpc.use_local_subchannel_pool", 1)]) as ch:
            block = service_pb2_grpc.ChainServiceStub(ch).GetBlock(rpc_pb2.GetBlockRequest(block_number=0), timeout=20)
            assert block.block.header.number == 0
    assert _wait(lambda: count() >= before + 8, timeout=30), (before, count())
    assert _wait(lambda: sum(per_worker().values()) >= sum(workers_before.values()) + 8, timeout=30), per_worker()


def test_health_and_streams_answer_through_a_worker(shared: NodeProcess) -> None:
    with grpc.insecure_channel(shared.grpc_target) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        for service in ("", "readiness", "liveness"):
            check = health.Check(health_pb2.HealthCheckRequest(service=service), timeout=20)
            assert check.status == health_pb2.HealthCheckResponse.SERVING
        watch = health.Watch(health_pb2.HealthCheckRequest(service="readiness"), timeout=20)
        assert next(watch).status == health_pb2.HealthCheckResponse.SERVING
        watch.cancel()
        stub = service_pb2_grpc.ChainServiceStub(channel)
        blocks = stub.SubscribeBlocks(rpc_pb2.SubscribeBlocksRequest(from_block=1), timeout=30)
        first = next(iter(blocks))  # the devnet's bootstrap block, from the main process through the relay
        assert first.event_id == 1 and first.block.header.number == 1
        blocks.cancel()
        with pytest.raises(grpc.RpcError) as err:  # the status and its reason-code trailer survive the relay
            stub.GetMessage(rpc_pb2.GetMessageRequest(hash=b"\x01" * 32), timeout=20)
        assert err.value.code() == grpc.StatusCode.NOT_FOUND
        assert trailer(err.value.trailing_metadata(), REASON_CODE) == "NOT_FOUND"


def test_a_killed_worker_is_replaced_and_a_killed_node_leaves_none(tmp_path: Path) -> None:
    node = NodeProcess(tmp_path / "data", "--read-workers", "2").start(timeout=120)
    assert node.proc is not None
    main = node.proc.pid
    family = set(_children(main))  # workers and the verify worker: cleaned up whatever happens
    try:
        workers = _workers(main)
        assert len(workers) == 2
        port = node.ready["metrics_port"]
        # both workers have looked up kept answers (and shipped their totals) before one dies
        assert _wait(lambda: _fresh_read(node.grpc_target) and len(_looked_up(port)) == 2, timeout=60)
        before = _looked_up(port)
        victim = min(workers)
        os.kill(victim, signal.SIGKILL)
        assert _wait(lambda: len(_workers(main) - {victim}) == 2 and not _alive(victim), timeout=90)
        family |= set(_children(main))
        assert any("read worker" in line and "starting another" in line for line in node.stderr_lines)
        restarts = scrape(port)["chain_read_worker_restarts_total"]
        assert restarts == [({}, 1.0)], restarts
        after = read_worker_lookups(port)  # counters: the dead worker's lookups still count
        assert all(after[i] >= n for i, n in before.items()), (before, after)
        for _ in range(6):  # every process on the port serves (new connections spread over them)
            assert _fresh_call(node.grpc_target) >= 0
        workers = _workers(main)
        os.kill(main, signal.SIGKILL)  # no orderly stop: the workers see their stdin pipe close
        node.proc.wait(30)
        assert _wait(lambda: not any(_alive(w) for w in workers), timeout=30), [_state(w) for w in workers]
        with socket.socket() as probe:  # nobody listens on the node's port any more
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind(("127.0.0.1", node.ready["grpc_port"]))
    finally:
        node.stop()
        for pid in family:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


async def test_kept_answer_counts_carry_over_a_worker_s_replacement() -> None:
    """The supervisor reads each worker's totals from its lines (over its stdout); when a worker exits its
    replacement counts from 0, and the node's counters go on from the dead one's (never fall)."""
    readers = ReadWorkers(2, lambda _i: None, Histogram("rpc.server.duration", "ms", "", MS_BUCKETS))  # type: ignore[arg-type,return-value]

    async def lines(index: int, *answers: list[object]) -> None:
        out = asyncio.StreamReader()
        for a in answers:
            out.feed_data(json.dumps({"event": "rpc", "series": [], "answers": a}).encode() + b"\n")
        out.feed_eof()
        await readers._follow(index, SimpleNamespace(stdout=out))  # type: ignore[arg-type]

    await lines(0, [3, 1, 900], [5, 2, 1200], [7, "x", 0], [-1, 0, 0])  # the malformed ones are skipped
    await lines(1, [4, 4, 700])
    assert readers.answer_lookups == {0: (5, 2), 1: (4, 4)} and readers.answer_bytes == {0: 1200, 1: 700}
    readers._answers_gone(0)  # worker 0 exited (kill -9): it keeps nothing, its lookups still count
    assert readers.answer_lookups[0] == (5, 2) and readers.answer_bytes[0] == 0
    await lines(0, [1, 3, 300])  # its replacement's own totals
    assert readers.answer_lookups == {0: (6, 5), 1: (4, 4)} and readers.answer_bytes == {0: 300, 1: 700}
