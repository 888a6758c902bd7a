"""An operator's mistake at start-up: `chain-node` says what is wrong on one line of stderr and exits 2.

Each case runs the real `chain-node` process; each mistake is refused before the node binds a port or
changes the data directory.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures.procs import free_port

NODE = Path(sys.executable).with_name("chain-node")


def run_node(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    addrs = ["--grpc-addr", f"127.0.0.1:{free_port()}", "--data-dir", str(tmp_path / "data")]
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("CHAIN_NODE_", "OTEL_"))}
    return subprocess.run(
        [str(NODE), *addrs, *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**clean, **(env or {})},
        check=False,
    )


def assert_one_line_exit_2(done: subprocess.CompletedProcess[str], says: str) -> None:
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert lines[0].startswith("chain-node: ") and says in lines[0]
    assert done.stdout == ""  # no ready line


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--follow", "127.0.0.1:1"], "--follow replica needs --restore"),
        (["--network", "testnet"], "needs --genesis"),
        (["--orderer", "etcd"], "needs --etcd-endpoints"),
        (["--orderer", "etcd", "--etcd-endpoints", "http://127.0.0.1:1", "--follow", "x:1"], "cannot also be"),
        (["--follow", "127.0.0.1:1", "--verify-blocks", "root"], "a --follow replica's blocks come from outside"),
        (["--metrics-addr", "nowhere"], "--metrics-addr"),
        (["--read-workers", "-2"], "--read-workers must be -1"),
        (["--tree-cache-nodes", "-1"], "--tree-cache-nodes must be 0 or more"),
        (["--read-answer-bytes", "-1"], "--read-answer-bytes must be 0 or more"),
        (["--verify-stall-seconds", "0"], "--verify-stall-seconds must be more than 0"),
        (["--verify-stall-seconds", "nan"], "--verify-stall-seconds must be more than 0"),
    ],
)
def test_bad_flag_combination_is_one_line_and_exit_2(tmp_path: Path, args: list[str], says: str) -> None:
    assert_one_line_exit_2(run_node(tmp_path, *args), says)
    assert not (tmp_path / "data" / "data.mdb").exists()


def test_verify_blocks_root_from_the_environment_is_refused_on_a_replica(tmp_path: Path) -> None:
    done = run_node(tmp_path, "--follow", "127.0.0.1:1", env={"CHAIN_NODE_VERIFY_BLOCKS": "root"})
    assert_one_line_exit_2(done, "--verify-blocks root")


def test_restore_from_a_directory_that_is_no_snapshot(tmp_path: Path) -> None:
    (tmp_path / "not-a-snapshot").mkdir()
    done = run_node(tmp_path, "--restore", str(tmp_path / "not-a-snapshot"))
    assert_one_line_exit_2(done, "is not a snapshot")
    assert not (tmp_path / "data" / "data.mdb").exists()


def test_bad_tracing_environment(tmp_path: Path) -> None:
    done = run_node(tmp_path, env={"OTEL_TRACES_SAMPLER_ARG": "often"})
    assert_one_line_exit_2(done, "OTEL_TRACES_SAMPLER_ARG")


def test_a_short_or_unreadable_cluster_secret_is_refused(tmp_path: Path) -> None:
    short = tmp_path / "short"
    short.write_text("tooshort\n")
    done = run_node(tmp_path, "--cluster-secret-file", str(short))
    assert_one_line_exit_2(done, "at least 16 bytes")
    assert "tooshort" not in done.stderr
    assert_one_line_exit_2(run_node(tmp_path, "--cluster-secret-file", str(tmp_path / "none")), "cannot read")
    done = run_node(tmp_path, env={"CHAIN_NODE_CLUSTER_SECRET": "tooshort"})
    assert_one_line_exit_2(done, "--cluster-secret: the cluster secret must be at least 16 bytes")
    assert "tooshort" not in done.stderr
