"""bench/bench_push.py's read-back: a pushed history checks equal to git's, and a history that moved on
locally (one more commit on main) does not."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.bench_push import check_equal, git_push
from tests.fixtures.githistory import generate
from tests.fixtures.nodeproc import NodeProcess
from tests.node.cli.chainview import new_project
from tests.node.cli.runner import Cli, funded
from tests.node.sdk.gitrepos import commit


def test_the_read_back_sees_a_missing_commit(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    generate(repo, commits=300, seed=2, tag_every=100)
    node = NodeProcess(tmp_path / "data", "--web-addr", "").start()
    try:
        cli = Cli(node, tmp_path / "home")
        funded(cli)
        pid = new_project(cli, "history")
        url = f"chain://127.0.0.1:{node.ready['grpc_port']}/{pid}"
        git_push(repo, cli.home, url, "refs/heads/*:refs/heads/*")
        git_push(repo, cli.home, url, "--tags")
        assert check_equal(cli, repo, pid) == 300
        commit(repo, "one more", 1_700_000_000)  # on main, locally only
        with pytest.raises(AssertionError):
            check_equal(cli, repo, pid)
    finally:
        node.stop()
