"""Envoy's preStop (charts/chain/files/envoy-prestop.sh, the very file the chart mounts) against the real Envoy
in front of a real node, with a server stream open; and the stats listener Prometheus scrapes.

Two Envoy processes stand for two replicas of the Deployment: the first is taken down the way the kubelet does
it (preStop hook, then SIGTERM); the client resumes on the second from the last event id it saw.
"""

from __future__ import annotations

import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from chain.v1 import rpc_pb2, service_pb2_grpc
from tests.fixtures.envoyproc import EnvoyProcess, render
from tests.fixtures.nodeproc import NodeProcess
from tests.fixtures.procs import free_port

ROOT = Path(__file__).resolve().parents[2]
PRESTOP = ROOT / "charts" / "chain" / "files" / "envoy-prestop.sh"
# The Deployment's drain flags, with a short window for the test (the chart passes envoy.drain.seconds).
DRAIN_ARGS = ("--drain-time-s", "3", "--drain-strategy", "immediate")


@pytest.fixture(scope="module")
def node(tmp_path_factory) -> Iterator[NodeProcess]:
    n = NodeProcess(
        tmp_path_factory.mktemp("drain-node"),
        "--web-addr",
        "",
        "--verify-workers",
        "0",
        "--empty-block-interval",
        "0.3",
    ).start()
    yield n
    n.stop()


def start_envoy(node: NodeProcess, workdir: Path) -> EnvoyProcess:
    config = render([("127.0.0.1", node.ready["grpc_port"])], health_interval="0.5s", admin_port=free_port())
    return EnvoyProcess(config, workdir, DRAIN_ARGS).start(healthy_hosts=1)


def http_status(url: str, method: str = "GET") -> int:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method=method), timeout=5) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as err:
        return int(err.code)


class Stream:
    """A SubscribeBlocks stream read on a thread: the events it got and how it ended."""

    def __init__(self, target: str, after_event_id: int = 0) -> None:
        self.channel = grpc.insecure_channel(target)
        stub = service_pb2_grpc.ChainServiceStub(self.channel)
        self.call = stub.SubscribeBlocks(rpc_pb2.SubscribeBlocksRequest(after_event_id=after_event_id))
        self.events: list[tuple[int, int]] = []  # (event id, block number)
        self.error: grpc.RpcError | None = None
        self.ended = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        try:
            for ev in self.call:
                self.events.append((ev.event_id, ev.block.header.number))
        except grpc.RpcError as err:
            self.error = err
        finally:
            self.ended.set()

    def wait_events(self, count: int, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while len(self.events) < count:
            assert not self.ended.is_set(), self.error
            assert time.monotonic() < deadline, f"{len(self.events)} events, wanted {count}"
            time.sleep(0.05)

    def close(self) -> None:
        self.call.cancel()
        self.channel.close()


def test_prestop_drains_then_sigterm_ends_the_stream_cleanly_and_it_resumes(node, tmp_path):
    leaving, staying = start_envoy(node, tmp_path / "a"), start_envoy(node, tmp_path / "b")
    try:
        stream = Stream(leaving.target)
        stream.wait_events(2)
        assert http_status(f"http://127.0.0.1:{leaving.health_port}/healthz") == 200
        hook = subprocess.Popen(
            ["bash", str(PRESTOP), leaving.admin.rsplit(":", 1)[1], "1", "3"], stdout=subprocess.PIPE, text=True
        )
        # The health check fails at once: probes and load balancers stop sending new clients here.
        deadline = time.monotonic() + 10
        while http_status(f"http://127.0.0.1:{leaving.health_port}/healthz") != 503:
            assert time.monotonic() < deadline, "health listener still passing"
            time.sleep(0.05)
        seen = len(stream.events)
        assert hook.wait(timeout=30) == 0
        # The stream was open through the whole hook: it kept delivering blocks, the hook waited for it.
        assert not stream.ended.is_set()
        assert len(stream.events) > seen
        draining = leaving.admin_json("/server_info")["state"]
        assert draining == "DRAINING", draining
        # The kubelet's SIGTERM: Envoy exits, the open stream ends with UNAVAILABLE (retry elsewhere), not a
        # stream reset (INTERNAL / RST_STREAM) and not a hang.
        leaving.stop()
        assert stream.ended.wait(30)
        assert stream.error is not None
        assert stream.error.code() == grpc.StatusCode.UNAVAILABLE, stream.error
        assert "RST_STREAM" not in (stream.error.details() or "")
        stream.close()
        # Resume on the other replica after the last event seen: nothing lost, nothing repeated.
        last_event, last_block = stream.events[-1]
        resumed = Stream(staying.target, after_event_id=last_event)
        resumed.wait_events(3)
        resumed.close()
        ids = [e for e, _ in stream.events] + [e for e, _ in resumed.events[:3]]
        assert ids == list(range(ids[0], ids[0] + len(ids)))
        assert resumed.events[0][1] == last_block + 1
    finally:
        leaving.stop()
        staying.stop()


def test_prestop_returns_as_soon_as_no_stream_is_left(node, tmp_path):
    envoy = start_envoy(node, tmp_path / "a")
    try:
        stream = Stream(envoy.target)
        stream.wait_events(1)
        hook = subprocess.Popen(["bash", str(PRESTOP), envoy.admin.rsplit(":", 1)[1], "0", "120"])
        time.sleep(2)
        assert hook.poll() is None  # still waiting: a stream is open
        stream.close()
        assert hook.wait(timeout=60) == 0  # well inside its 120 s window
    finally:
        envoy.stop()


def test_stats_listener_serves_only_prometheus_stats(node, tmp_path):
    envoy = start_envoy(node, tmp_path / "a")
    try:
        base = f"http://127.0.0.1:{envoy.stats_port}"
        with urllib.request.urlopen(base + "/stats/prometheus", timeout=5) as resp:
            body = resp.read().decode()
        assert "envoy_cluster_upstream_cx_total" in body
        assert 'envoy_cluster_name="chain_node"' in body
        # Nothing else of the admin interface: no other read, no mutation.
        for path in ("/stats", "/config_dump", "/clusters", "/server_info", "/stats/prometheus/../../config_dump"):
            assert http_status(base + path) == 404, path
        for path in ("/healthcheck/fail", "/drain_listeners", "/quitquitquit", "/stats/prometheus"):
            assert http_status(base + path, "POST") == 404, path
        assert http_status(f"http://127.0.0.1:{envoy.health_port}/healthz") == 200
        assert envoy.admin_json("/server_info")["state"] == "LIVE"
    finally:
        envoy.stop()
