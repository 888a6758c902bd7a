"""chainctl on a node that refuses writes for now: it sends them again as the refusal says (a real node on a
real tmpfs, filled), and says the node's reason, not "cannot reach the node", once it gives up."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import grpc

from tests.fixtures.actors import fresh
from tests.fixtures.disk import fill
from tests.fixtures.nodeproc import ROOT, NodeProcess
from tests.node.cli.runner import Cli, funded


def chainctl(node: NodeProcess, home: Path, *args: str) -> subprocess.Popen[str]:
    cmd = [sys.executable, "-m", "node.cli.main", "--node", node.grpc_target, "--home", str(home), *args]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def refused_while_full(node: NodeProcess, tmpfs: Path) -> None:
    """Fill the disk, then submit until the node refuses (its commits fail, then admissions stop)."""
    fill(tmpfs / "ballast")
    deadline = time.monotonic() + 60
    with node.client(timeout=10) as c:
        while True:
            try:
                c.submit(fresh())
            except grpc.RpcError:
                return
            assert time.monotonic() < deadline, "the node kept accepting on a full disk"


def test_a_write_refused_for_now_is_sent_again_and_goes_through_once_the_node_can(tmpfs: Path) -> None:
    node = NodeProcess(tmpfs / "data", "--web-addr", "").start()
    try:
        cli = Cli(node, tmpfs.parent / "home")
        funded(cli, units=2)
        refused_while_full(node, tmpfs)

        gave_up = cli("--retry-seconds", "0", "project", "create", "now", ok=False)
        line = gave_up.err.strip().splitlines()[-1]
        assert line.startswith("error: STORAGE_FAILED: this node cannot write its store"), gave_up.err
        assert "cannot reach the node" not in line

        waiting = chainctl(node, tmpfs.parent / "home", "project", "create", "later")
        assert waiting.stderr is not None
        first = waiting.stderr.readline()  # its first retry note: the refusal, and when it sends again
        assert first.startswith("STORAGE_FAILED: this node cannot write its store") and "sending again in" in first
        assert waiting.poll() is None
        (tmpfs / "ballast").unlink()  # space returns: the node recovers by itself, the next send goes through
        out, err = waiting.communicate(timeout=60)
        assert waiting.returncode == 0, first + err
        assert "later" in out
    finally:
        node.stop()
