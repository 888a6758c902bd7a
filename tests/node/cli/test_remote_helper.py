"""`git push` through git-remote-chain: the real git binary, the installed helper, a real chain-node.

A history with CRLF messages, whitespace-laden titles, a merge and an annotated tag goes up with git's
own commands and is read back equal to what git says: commits, parents, titles, authors, refs."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from chain.v1 import rpc_pb2
from node.cli.remote_helper import HelperError, parse_url
from node.sdk import git
from tests.fixtures.githistory import generate
from tests.fixtures.nodeproc import NodeProcess
from tests.node.cli.chainview import commits_on_chain, every_commit, every_ref, new_project, refs_on_chain
from tests.node.cli.runner import Cli
from tests.node.sdk.gitrepos import git_env, sh

BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def cli(tmp_path_factory) -> Iterator[Cli]:
    base = tmp_path_factory.mktemp("helper")
    node = NodeProcess(base / "data", "--web-addr", "").start()
    try:
        c = Cli(node, base / "home")
        c("keys", "create", "wallet", "--type", "secp256k1")
        c("account", "init", "--wallet", "wallet")
        c("account", "fund", "wallet", "--units", "1", "--authority", node.ready["devnet_authority"])
        yield c
    finally:
        node.stop()


def git_run(cli: Cli, repo: Path, *args: str, when: int = 1_700_000_000) -> subprocess.CompletedProcess[str]:
    env = {**git_env(when), "CHAINCTL_HOME": str(cli.home), "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run(
        ["git", "-C", str(repo), *args], env=env, capture_output=True, text=True, timeout=120, check=False
    )


def commit_verbatim(repo: Path, message: bytes, when: int, name: str) -> str:
    (repo / name).write_text(f"{when}\n")
    sh(repo, "add", "-A")
    msg = repo / ".git" / "MSG"
    msg.write_bytes(message)
    sh(repo, "commit", "-q", "--cleanup=verbatim", "-F", str(msg), when=when)
    return sh(repo, "rev-parse", "HEAD")


def tricky_history(repo: Path) -> None:
    repo.mkdir(parents=True)
    sh(repo, "init", "-q", "-b", "main")
    commit_verbatim(
        repo, b"root commit\r\nwith a CRLF body merged by naive parsers\r\n\r\nbody\r\n", 1_700_000_000, "a"
    )
    sh(repo, "checkout", "-q", "-b", "feature")
    commit_verbatim(repo, b"   leading spaces and   inner   runs\t\n", 1_700_000_100, "b")
    commit_verbatim(repo, b"\n\ttab title\ntwo lines   \n\nbody\n", 1_700_000_200, "b")
    sh(repo, "checkout", "-q", "main")
    commit_verbatim(repo, b"main work\n", 1_700_000_300, "c")
    sh(repo, "merge", "-q", "--no-ff", "feature", "-m", "merge feature", when=1_700_000_400)
    sh(repo, "tag", "-a", "v1", "-m", "release one", when=1_700_000_500)


def assert_chain_equals_git(cli: Cli, repo: Path, pid: str) -> None:
    gitrepo = git.GitRepo(repo)
    local, _ = gitrepo.refs()
    shas = gitrepo.rev_list([r.sha for r in local])
    commits = gitrepo.read_commits(shas)
    by_hash = {c.chain_hash: c for c in commits.values()}
    assert set(commits_on_chain(cli, pid)) == set(by_hash)
    stub = cli.node.client().stub
    for h, c in by_hash.items():
        got = stub.GetCommit(rpc_pb2.GetCommitRequest(project_id=bytes.fromhex(pid[2:]), commit_hash=h)).commit
        assert got.title == git_run(cli, repo, "log", "-1", "--format=%s", c.sha).stdout.removesuffix("\n")
        assert got.author_name == sh(repo, "log", "-1", "--format=%an", c.sha)
        assert got.author_timestamp == int(sh(repo, "log", "-1", "--format=%at", c.sha))
        assert [by_hash_key(by_hash, p) for p in got.parents] == list(c.parents)
    assert refs_on_chain(cli, pid) == {
        r.name.encode(): (commits[r.sha].chain_hash, refs_on_chain(cli, pid)[r.name.encode()][1]) for r in local
    }


def by_hash_key(by_hash: dict[bytes, git.GitCommit], h: bytes) -> str:
    return by_hash[bytes(h)].sha


def test_git_push_through_the_helper(cli, tmp_path):
    repo = tmp_path / "repo"
    tricky_history(repo)
    pid = new_project(cli, "helper")
    port = cli.node.ready["grpc_port"]
    sh(repo, "remote", "add", "chain", f"chain://127.0.0.1:{port}/wallet/helper")

    first = git_run(cli, repo, "push", "--progress", "chain", "main")
    assert first.returncode == 0, first.stderr
    assert "* [new branch]      main -> main" in first.stderr
    assert "Writing commit bundles: 100% (1/1), done." in first.stderr
    tags = git_run(cli, repo, "push", "--tags", "chain")
    assert tags.returncode == 0, tags.stderr
    assert "* [new tag]         v1 -> v1" in tags.stderr
    feature = git_run(cli, repo, "push", "chain", "feature")
    assert feature.returncode == 0, feature.stderr
    assert_chain_equals_git(cli, repo, pid)

    # Nothing moved: git itself sees it (list maps the annotated tag back to its local id).
    again = git_run(cli, repo, "push", "--tags", "chain", "main")
    assert (again.returncode, "Everything up-to-date" in again.stderr) == (0, True), again.stderr

    # Delete a branch on chain with git's `:ref`.
    deleted = git_run(cli, repo, "push", "chain", ":feature")
    assert deleted.returncode == 0, deleted.stderr
    assert "[deleted]" in deleted.stderr
    assert b"refs/heads/feature" not in refs_on_chain(cli, pid)
    gone = git_run(cli, repo, "push", "chain", ":feature")
    assert gone.returncode != 0

    # A rewrite is refused by git (non-fast-forward) until --force.
    sh(repo, "reset", "-q", "--hard", "HEAD~1")
    commit_verbatim(repo, b"rewritten main\n", 1_700_000_600, "d")
    refused = git_run(cli, repo, "push", "chain", "main")
    assert refused.returncode == 1
    assert "[rejected]" in refused.stderr
    forced = git_run(cli, repo, "push", "--force", "chain", "main")
    assert forced.returncode == 0, forced.stderr
    assert "(forced update)" in forced.stderr
    new_main = git.GitRepo(repo).read_commits([sh(repo, "rev-parse", "main")])
    assert refs_on_chain(cli, pid)[b"refs/heads/main"][0] == next(iter(new_main.values())).chain_hash


def test_chainctl_push_of_the_same_history_reads_back_equal_to_git(cli, tmp_path):
    """The same tricky history (CRLF, whitespace titles, a merge, an annotated tag) pushed with chainctl."""
    repo = tmp_path / "repo"
    tricky_history(repo)
    pid = new_project(cli, "chainctl-tricky")
    cli("push", str(repo), "--project", pid)
    assert_chain_equals_git(cli, repo, pid)


def test_fetch_says_the_chain_holds_no_objects(cli, tmp_path):
    repo = tmp_path / "repo"
    tricky_history(repo)
    pid = new_project(cli, "clone-me")
    port = cli.node.ready["grpc_port"]
    url = f"chain://127.0.0.1:{port}/{pid}"
    assert git_run(cli, repo, "push", url, "main").returncode == 0
    clone = git_run(cli, tmp_path, "clone", url, "copy")
    assert clone.returncode != 0
    assert "chain remotes hold no git objects" in clone.stderr


def test_push_without_account_fails_per_ref(cli, tmp_path):
    repo = tmp_path / "repo"
    tricky_history(repo)
    pid = new_project(cli, "no-account")
    port = cli.node.ready["grpc_port"]
    env_home = tmp_path / "empty-home"
    out = subprocess.run(
        ["git", "-C", str(repo), "push", f"chain://127.0.0.1:{port}/{pid}", "main"],
        env={**git_env(), "CHAINCTL_HOME": str(env_home), "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 1
    assert "ACCOUNT_NOT_INITIALIZED" in out.stderr
    assert refs_on_chain(cli, pid) == {}


def test_parse_url():
    assert parse_url("chain://example.org/0xab/demo").node == "example.org:50051"
    assert parse_url("chain://[::1]:7/owner/demo").project == "owner/demo"
    for bad in ("http://h/o/p", "chain://h/", "chain://h/a/b/c"):
        with pytest.raises(HelperError):
            parse_url(bad)


def test_git_push_prune_and_dry_run(cli, tmp_path):
    repo = tmp_path / "repo"
    tricky_history(repo)
    pid = new_project(cli, "prune")
    port = cli.node.ready["grpc_port"]
    sh(repo, "remote", "add", "chain", f"chain://127.0.0.1:{port}/{pid}")
    dry = git_run(cli, repo, "push", "--dry-run", "chain", "main", "feature")
    assert dry.returncode == 0, dry.stderr
    assert refs_on_chain(cli, pid) == {}
    assert git_run(cli, repo, "push", "chain", "main", "feature").returncode == 0
    sh(repo, "branch", "-q", "-D", "feature")
    pruned = git_run(cli, repo, "push", "--prune", "chain", "refs/heads/*:refs/heads/*")
    assert pruned.returncode == 0, pruned.stderr
    assert "[deleted]" in pruned.stderr
    assert set(refs_on_chain(cli, pid)) == {b"refs/heads/main"}


def test_a_history_past_the_commit_limit_pushes_whole(cli, tmp_path):
    """12,000 generated commits with merges and side branches, pushed by `git push` into a new project: past
    the 10,000 the chain prunes back to, every commit stays (the refs and, between bundles, the push's
    staging refs reach them all) and reads back equal to git's; no staging ref is left. Fails without the
    staging refs (node/sdk/staging.py): the later bundles prune what the earlier ones sent."""
    repo = tmp_path / "big"
    generate(repo, commits=12_000, seed=3, width=4, merge_every=1_000, branch_every=300)
    pid = new_project(cli, "big")
    sh(repo, "remote", "add", "chain", f"chain://127.0.0.1:{cli.node.ready['grpc_port']}/{pid}")
    heads = git_run(cli, repo, "push", "chain", "refs/heads/*:refs/heads/*")
    assert heads.returncode == 0, heads.stderr
    tags = git_run(cli, repo, "push", "--tags", "chain")
    assert tags.returncode == 0, tags.stderr
    gitrepo = git.GitRepo(repo)
    local, _ = gitrepo.refs()
    commits = gitrepo.read_commits(gitrepo.rev_list([r.sha for r in local]))
    chain_of = {sha: c.chain_hash for sha, c in commits.items()}
    log = sh(repo, "log", "--all", "--format=%H %at %s")
    expected = {}
    for row in log.splitlines():
        sha, when, title = row.split(" ", 2)
        expected[chain_of[sha]] = (tuple(chain_of[p] for p in commits[sha].parents), title, int(when))
    assert len(expected) == 12_000
    assert every_commit(cli, pid) == expected
    assert every_ref(cli, pid) == {r.name.encode(): chain_of[r.sha] for r in local}  # no staging ref left


def test_refs_past_the_limit_are_each_refused_in_gits_words(cli, tmp_path):
    """204 refs pushed at once onto a project that allows 200: the 200 that fit land, and git names each of
    the other four `! [remote rejected] ... (LIMIT_EXCEEDED: refs per project: at most 200)`."""
    repo = tmp_path / "repo"
    tricky_history(repo)  # main, feature, v1
    for i in range(201):
        sh(repo, "tag", f"t{i:03d}")
    pid = new_project(cli, "many-refs")
    sh(repo, "remote", "add", "chain", f"chain://127.0.0.1:{cli.node.ready['grpc_port']}/{pid}")
    out = git_run(cli, repo, "push", "chain", "refs/heads/*:refs/heads/*", "refs/tags/*:refs/tags/*")
    assert out.returncode == 1
    refused = [line for line in out.stderr.splitlines() if "[remote rejected]" in line]
    assert len(refused) == 4, out.stderr
    assert all(line.endswith("(LIMIT_EXCEEDED: refs per project: at most 200)") for line in refused), refused
    assert len(every_ref(cli, pid)) == 200


def test_chainctl_push_names_each_refused_ref(cli, tmp_path):
    repo = tmp_path / "repo"
    tricky_history(repo)
    for i in range(199):
        sh(repo, "tag", f"t{i:03d}")
    pid = new_project(cli, "many-refs-chainctl")
    failed = cli("push", str(repo), "--project", pid, ok=False)  # 202 refs: two refused, a line each
    assert failed.rc != 0
    lines = [line for line in failed.err.splitlines() if line.startswith(" ! ")]
    assert len(lines) == 2 and all("(LIMIT_EXCEEDED: refs per project: at most 200)" in x for x in lines), lines
    assert "LIMIT_EXCEEDED: 2 ref(s) refused" in failed.err
    assert len(every_ref(cli, pid)) == 200
