"""Node lifecycle over real sockets: health during drain, snapshots and restore, env configuration."""

from __future__ import annotations

import asyncio
import dataclasses
import signal
import socket
import threading
import time
from pathlib import Path
from typing import Any

import grpc
import pytest
from aiohttp import web
from grpc_health.v1 import health_pb2, health_pb2_grpc

from chain.v1 import rpc_pb2
from node.chain import Chain
from node.errors import StoreRefused
from node.observability.metrics import MetricsEndpoint
from node.server.app import NodeApp
from node.server.config import parse_config
from node.server.devnet import AUTHORITY_FILE
from node.server.events import EventHub
from node.server.ordering.orderer import SoloOrderer
from node.server.readers.sharing import PortLock
from node.server.rpc.read_batch import ReadBatchServicer
from node.server.snapshots.jobs import SnapshotJobs
from node.server.write.pipeline import Pipeline
from node.server.write.verify import Verifier
from tests.fixtures.actors import new_account
from tests.fixtures.nodeproc import NodeProcess


def test_health_flips_to_not_serving_on_sigterm_before_the_port_closes(tmp_path):
    node = NodeProcess(tmp_path / "data", "--drain-seconds", "1.0", "--web-addr", "").start()
    channel = grpc.insecure_channel(node.grpc_target)
    health = health_pb2_grpc.HealthStub(channel)
    assert health.Check(health_pb2.HealthCheckRequest(service="")).status == health_pb2.HealthCheckResponse.SERVING
    seen: list[str] = []

    def poll() -> None:
        while True:
            try:
                status = health.Check(health_pb2.HealthCheckRequest(service="chain.v1.ChainService"), timeout=1)
                seen.append(health_pb2.HealthCheckResponse.ServingStatus.Name(status.status))
            except grpc.RpcError as err:
                seen.append(err.code().name)
                if err.code() == grpc.StatusCode.UNAVAILABLE:
                    return
            time.sleep(0.01)

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    time.sleep(0.2)
    node.signal(signal.SIGTERM)
    poller.join(20)
    assert node.stop() == 0
    assert "NOT_SERVING" in seen
    first_not_serving = seen.index("NOT_SERVING")
    assert "SERVING" in seen[:first_not_serving]
    assert seen[-1] == "UNAVAILABLE"
    assert all(s != "SERVING" for s in seen[first_not_serving:])


def test_snapshot_then_restore_gives_the_same_state_root(tmp_path):
    node = NodeProcess(tmp_path / "a", "--web-addr", "").start()
    c = node.client()
    alice = new_account(c, node.authority())
    c.commit(alice.b.project_create("snap"))
    assert c.admin is not None
    info = c.admin.CreateSnapshot(rpc_pb2.CreateSnapshotRequest()).snapshot
    assert c.stub.GetSnapshotInfo(rpc_pb2.GetSnapshotInfoRequest()).snapshot == info
    status = c.stub.GetNodeStatus(rpc_pb2.GetNodeStatusRequest()).status
    assert info.block_number <= status.block_height
    listed = c.admin.ListSnapshots(rpc_pb2.ListSnapshotsRequest()).snapshots
    assert [s.name for s in listed] == [info.name]
    node.stop()

    restored = NodeProcess(
        tmp_path / "b", "--web-addr", "", "--restore", str(tmp_path / "a" / "snapshots" / info.name)
    ).start()
    r = restored.client()
    head = r.stub.GetBlock(rpc_pb2.GetBlockRequest(block_number=info.block_number)).block
    assert head.header.state_root == info.state_root
    rs = r.stub.GetNodeStatus(rpc_pb2.GetNodeStatusRequest()).status
    assert rs.block_height >= info.block_number
    account = r.stub.GetAccount(rpc_pb2.GetAccountRequest(owner_address=alice.address)).account
    assert account.project_count == 1
    restored.stop()


def test_admin_token_is_enforced(tmp_path):
    node = NodeProcess(tmp_path / "data", "--web-addr", "", "--admin-token", "s3cret").start()
    try:
        plain = node.client()
        assert plain.admin is not None
        try:
            plain.admin.ListSnapshots(rpc_pb2.ListSnapshotsRequest())
            raise AssertionError("admin call without a token succeeded")
        except grpc.RpcError as err:
            assert err.code() == grpc.StatusCode.UNAUTHENTICATED
        ok = node.client(admin_token="s3cret")
        assert ok.admin is not None
        assert list(ok.admin.ListSnapshots(rpc_pb2.ListSnapshotsRequest(), metadata=ok.admin_metadata).snapshots) == []
    finally:
        node.stop()


def test_every_flag_reads_its_environment_variable():
    cfg = parse_config(
        ["--block-interval", "0.5"],
        {
            "CHAIN_NODE_GRPC_ADDR": "0.0.0.0:6000",
            "CHAIN_NODE_BLOCK_INTERVAL": "2",
            "CHAIN_NODE_CORS_ORIGIN": "https://a.test,https://b.test",
            "CHAIN_NODE_MEMPOOL_CAPACITY": "10",
            "CHAIN_NODE_TREE_CACHE_NODES": "7",
        },
    )
    assert cfg.grpc_addr == "0.0.0.0:6000"
    assert cfg.block_interval == 0.5  # the flag wins
    assert cfg.cors_origins == ("https://a.test", "https://b.test")
    assert cfg.mempool_capacity == 10
    assert cfg.tree_cache_nodes == 7


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _in_process(data_dir: Path, *argv: str) -> NodeApp:
    flags = ["--data-dir", str(data_dir), "--grpc-addr", "127.0.0.1:0", "--web-addr", "127.0.0.1:0"]
    flags += ["--admin-addr", "127.0.0.1:0", "--internal-addr", "127.0.0.1:0", "--verify-workers", "0"]
    flags += ["--read-workers", "0"]  # one process unless a test asks for workers (the default sizes them)
    return NodeApp(parse_config([*flags, "--drain-seconds", "0", "--block-interval", "0.05", *argv], {}))


async def test_a_start_that_fails_half_way_closes_what_it_started(tmp_path: Path) -> None:
    """The metrics port and the read workers' port lock, taken before the store opens, are given back when
    the store is refused: the start unwinds its exit stack."""
    data = tmp_path / "data"
    data.mkdir()
    (data / AUTHORITY_FILE).write_text("{}")  # an authority but no store: refused
    metrics, grpc_port = _free_port(), _free_port()
    app = _in_process(data, "--metrics-addr", f"127.0.0.1:{metrics}", "--read-workers", "1")
    app.config = dataclasses.replace(app.config, grpc_addr=f"127.0.0.1:{grpc_port}")
    with pytest.raises(StoreRefused):
        await app.start()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", metrics))  # the endpoint let its port go
    PortLock.take("--grpc-addr", f"127.0.0.1:{grpc_port}").release()  # and the lock is free
    await app.stop()  # nothing left to stop


async def test_stop_undoes_start_in_reverse(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """NOT_SERVING and the drain first, then the orderer, the hub, the listeners, the metrics endpoint before
    what its scrapes read, the snapshot jobs, the pipeline, the verifier and the chain."""
    order: list[str] = []

    def record(cls: type, name: str, label: str) -> None:
        original = getattr(cls, name)
        if asyncio.iscoroutinefunction(original):

            async def wrapped_async(self: object, *args: object, **kwargs: object) -> object:
                order.append(label)
                return await original(self, *args, **kwargs)

            monkeypatch.setattr(cls, name, wrapped_async)
        else:

            def wrapped(self: object, *args: object, **kwargs: object) -> object:
                order.append(label)
                return original(self, *args, **kwargs)

            monkeypatch.setattr(cls, name, wrapped)

    for cls, name, label in (
        (NodeApp, "_drain", "drain"),
        (SoloOrderer, "stop", "orderer"),
        (EventHub, "close", "hub"),
        (web.AppRunner, "cleanup", "web"),
        (ReadBatchServicer, "close", "read batches"),
        (MetricsEndpoint, "stop", "metrics"),
        (SnapshotJobs, "close", "jobs"),
        (Pipeline, "close", "pipeline"),
        (Verifier, "close", "verifier"),
        (Chain, "close", "chain"),
    ):
        record(cls, name, label)
    make = grpc.aio.server

    def server(*args: Any, **kwargs: Any) -> grpc.aio.Server:
        made = make(*args, **kwargs)
        stop = made.stop

        async def stopping(grace: float | None) -> None:
            order.append("server")
            await stop(grace)

        monkeypatch.setattr(made, "stop", stopping)
        return made

    monkeypatch.setattr(grpc.aio, "server", server)
    app = _in_process(tmp_path / "data", "--metrics-addr", "127.0.0.1:0")
    await app.start()
    order.clear()
    await app.stop()
    first = [label for n, label in enumerate(order) if label not in order[:n]]
    assert first == [
        "drain", "orderer", "hub", "web", "server", "read batches", "metrics", "jobs", "pipeline", "verifier", "chain"
    ]  # fmt: skip
    assert order.count("server") == 3  # admin, internal (after its read streams ended), public
