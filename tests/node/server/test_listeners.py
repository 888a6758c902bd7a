"""Exclusive listeners: a second chain-node on any address a running node holds stops
with one line naming the flag and the address, no traceback, a non-zero exit; the running node is
untouched (no shared port answering for two chains)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from chain.v1 import rpc_pb2
from tests.fixtures.nodeproc import ROOT, NodeProcess

FLAGS = {
    "--grpc-addr": "grpc_port",
    "--web-addr": "web_port",
    "--admin-addr": "admin_port",
    "--metrics-addr": "metrics_port",
}


@pytest.fixture(scope="module", params=["0", "2"], ids=["main-only", "read-workers-2"])
def running(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    """The first node, also with read workers: then its gRPC port is shared by its own processes only."""
    data = tmp_path_factory.mktemp("first") / "data"
    node = NodeProcess(data, "--read-workers", request.param).start(timeout=120)
    yield node
    node.stop()


@pytest.mark.parametrize("flag", sorted(FLAGS))
def test_a_taken_address_stops_a_second_node_with_one_line(running: NodeProcess, tmp_path, flag: str) -> None:
    taken = f"127.0.0.1:{running.ready[FLAGS[flag]]}"
    addrs = {f: "127.0.0.1:0" for f in FLAGS} | {flag: taken}
    cmd = [sys.executable, "-m", "node.server.main", "--data-dir", str(tmp_path / "second")]
    for f, addr in addrs.items():
        cmd += [f, addr]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run(cmd, check=False, cwd=ROOT, env=env, capture_output=True, text=True, timeout=90)
    assert done.returncode != 0
    assert done.stdout == ""  # never a ready line
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert flag in lines[0] and taken in lines[0] and "Traceback" not in done.stderr
    assert not (tmp_path / "second" / "data.mdb").exists()  # refused before a store was made
    with running.client() as client:  # the first node still answers, alone, on its port
        status = client.stub.GetNodeStatus(rpc_pb2.GetNodeStatusRequest(), timeout=10).status
        assert status.network == "devnet" and status.uptime_seconds >= 0
