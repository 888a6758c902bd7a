"""chainctl's errors against a real node: one line each, saying what to do, hex always 0x-prefixed."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator

import pytest

from node.cli.run import explain
from tests.fixtures.nodeproc import NodeProcess
from tests.node.cli.runner import Cli


@pytest.fixture(scope="module")
def cli(tmp_path_factory) -> Iterator[Cli]:
    base = tmp_path_factory.mktemp("cli-errors")
    node = NodeProcess(base / "data").start()  # with its HTTP/1.1 web port
    try:
        c = Cli(node, base / "home")
        c("keys", "create", "wallet", "--type", "secp256k1")
        c("account", "init", "--wallet", "wallet")
        yield c
    finally:
        node.stop()


def one_line(err: str) -> str:
    lines = err.splitlines()
    assert len(lines) == 1, err
    return lines[0]


def test_no_storage_names_account_fund(cli):
    line = one_line(cli("project", "create", "p", ok=False).err)
    assert line.startswith("error: NO_STORAGE: ")
    assert "chainctl account fund" in line


def test_project_references_are_0x_everywhere(cli):
    bare = "ab" * 32
    for ref in (bare, "0x" + bare):
        line = one_line(cli("project", "show", ref, ok=False).err)
        assert line.startswith("error: NOT_FOUND:")
        assert "0x" + bare in line
        assert not re.search(rf"(?<!0x){bare}", line)
    by_name = one_line(cli("project", "show", "wallet/nope", ok=False).err)
    assert re.search(r"0x[0-9a-f]{40}/nope", by_name), by_name


def test_rest_port_is_named_in_one_line(cli):
    web = f"http://127.0.0.1:{cli.node.ready['web_port']}"
    line = one_line(cli("--node", web, "status", ok=False).err)  # the last --node wins
    assert "answers HTTP/1.1" in line and "gRPC port" in line


def test_explain_leaves_git_ids_alone():
    sha = "cd" * 20
    assert explain("GIT_ERROR", f"object {sha} is missing") == f"object {sha} is missing"
    assert explain("NOT_FOUND", f"account {sha}") == f"account 0x{sha}"
    assert explain("NOT_FOUND", f"account 0x{sha}") == f"account 0x{sha}"


def test_non_utf8_names_in_errors_stay_printable(cli, tmp_path):
    """A real process (stdout and stderr are UTF-8 streams, not StringIO): no traceback, valid JSON."""
    bad = tmp_path / os.fsdecode(b"caf\xe9")  # a directory name that is not UTF-8, and does not exist
    cmd = [sys.executable, "-m", "node.cli.main", "--node", cli.node.grpc_target, "--home", str(cli.home)]
    env = {**os.environ, "PYTHONIOENCODING": "utf-8", "LC_ALL": "C.UTF-8"}
    done = subprocess.run(
        [*cmd, "--json", "push", str(bad), "--project", "0x" + "ab" * 32],
        capture_output=True,
        env=env,
        timeout=60,
        check=False,
    )
    line = one_line(done.stderr.decode("utf-8"))
    assert done.returncode == 1
    assert line.startswith("error: GIT_ERROR:") and "caf\\xe9" in line
    assert json.loads(done.stdout)["error"]["reason"] == "GIT_ERROR"
    assert explain("GIT_ERROR", f"ref {bad.name} is odd") == "ref caf\\xe9 is odd"
