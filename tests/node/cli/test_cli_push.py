"""chainctl push against a real node: full history, incremental pushes, ref nonces, force."""

from __future__ import annotations

import io
from collections.abc import Iterator

import pytest

from chain.v1 import message_pb2 as pb
from chain.v1 import rpc_pb2
from node.cli.common import Progress
from tests.fixtures.nodeproc import NodeProcess
from tests.node.cli.chainview import chain_hashes, commits_on_chain, new_project, refs_on_chain
from tests.node.cli.runner import Cli
from tests.node.sdk.gitrepos import commit, make_history, sh


@pytest.fixture(scope="module")
def cli(tmp_path_factory) -> Iterator[Cli]:
    base = tmp_path_factory.mktemp("push")
    node = NodeProcess(base / "data", "--web-addr", "").start()
    try:
        c = Cli(node, base / "home")
        c("keys", "create", "wallet", "--type", "secp256k1")
        c("account", "init", "--wallet", "wallet")
        c("account", "fund", "wallet", "--units", "2", "--authority", node.ready["devnet_authority"])
        yield c
    finally:
        node.stop()


def bundle_sizes(cli: Cli, bundle_hashes: list[str]) -> list[int]:
    stub = cli.node.client().stub
    sizes = []
    for h in bundle_hashes:
        cm = stub.GetMessage(rpc_pb2.GetMessageRequest(hash=bytes.fromhex(h[2:]))).message
        assert cm.message.data.type == pb.MESSAGE_TYPE_COMMIT_BUNDLE
        sizes.append(len(cm.message.data.commit_bundle.commits))
    return sizes


def test_push_history_then_only_new_commits_then_force(cli, tmp_path):
    repo = tmp_path / "repo"
    ids = make_history(repo)
    pid = new_project(cli, "history")
    first = cli.json("push", str(repo), "--project", pid)
    assert first["commits_sent"] == 6
    assert bundle_sizes(cli, first["bundles"]) == [6]
    hashes = chain_hashes(repo)
    assert set(commits_on_chain(cli, pid)) == set(hashes.values())
    expected_refs = {
        b"refs/heads/main": (hashes[ids["merge"]], 1),
        b"refs/heads/feature": (hashes[ids["b2"]], 1),
        b"refs/tags/v1": (hashes[ids["merge"]], 1),
        b"refs/tags/light": (hashes[ids["b1"]], 1),
    }
    assert refs_on_chain(cli, pid) == expected_refs
    stub = cli.node.client().stub
    for name, (h, nonce) in expected_refs.items():
        ref = stub.GetRef(rpc_pb2.GetRefRequest(project_id=bytes.fromhex(pid[2:]), ref_name=name)).ref
        assert (bytes(ref.hash), ref.nonce) == (h, nonce)
    ancestors = stub.GetCommitAncestors(
        rpc_pb2.GetCommitAncestorsRequest(project_id=bytes.fromhex(pid[2:]), commit_hash=hashes[ids["merge"]])
    ).commits
    assert {bytes(c.hash) for c in ancestors} == {hashes[s] for s in ids.values() if s != ids["merge"]}
    merge = stub.GetCommit(
        rpc_pb2.GetCommitRequest(project_id=bytes.fromhex(pid[2:]), commit_hash=hashes[ids["merge"]])
    ).commit
    assert list(merge.parents) == [hashes[ids["a2"]], hashes[ids["b2"]]]
    assert merge.title == "merge feature"

    # Nothing new: nothing sent, nonces unchanged.
    again = cli.json("push", str(repo), "--project", pid)
    assert (again["commits_sent"], again["bundles"]) == (0, [])
    assert {r["status"] for r in again["refs"]} == {"up-to-date"}
    assert refs_on_chain(cli, pid) == expected_refs

    # New commits on two branches: only those are sent; their refs advance to nonce 2.
    c1 = commit(repo, "main 3", 1_700_001_000)
    c2 = commit(repo, "main 4", 1_700_001_100)
    sh(repo, "checkout", "-q", "feature")
    c3 = commit(repo, "feature 3", 1_700_001_200, "b.txt")
    third = cli.json("push", str(repo), "--project", pid, "--batch", "2")
    hashes = chain_hashes(repo)
    assert third["commits_sent"] == 3
    assert bundle_sizes(cli, third["bundles"]) == [2, 1]
    assert len(commits_on_chain(cli, pid)) == 9
    assert set(commits_on_chain(cli, pid)[:3]) == {hashes[c1], hashes[c2], hashes[c3]}
    refs = refs_on_chain(cli, pid)
    assert refs[b"refs/heads/main"] == (hashes[c2], 2)
    assert refs[b"refs/heads/feature"] == (hashes[c3], 2)
    assert refs[b"refs/tags/v1"] == (hashes[ids["merge"]], 1)

    # Rewrite feature: refused locally without --force, then forced.
    sh(repo, "reset", "-q", "--hard", "HEAD~1")
    rewritten = commit(repo, "feature 3 rewritten", 1_700_001_300, "b.txt")
    refused = cli("push", str(repo), "--project", pid, ok=False)
    assert refused.rc == 1
    assert refused.err.startswith("error: NOT_FAST_FORWARD: refs/heads/feature")
    assert refs_on_chain(cli, pid)[b"refs/heads/feature"] == (hashes[c3], 2)
    forced = cli.json("push", str(repo), "--project", pid, "--force")
    assert forced["commits_sent"] == 1
    assert {r["ref"]: r["status"] for r in forced["refs"]}["refs/heads/feature"] == "forced"
    new_hash = chain_hashes(repo)[rewritten]
    assert refs_on_chain(cli, pid)[b"refs/heads/feature"] == (new_hash, 3)
    log = stub.GetRefLog(
        rpc_pb2.GetRefLogRequest(project_id=bytes.fromhex(pid[2:]), ref_name=b"refs/heads/feature")
    ).entries
    assert [(e.nonce, e.force) for e in log] == [(3, True), (2, False), (1, False)]


def test_push_selected_refs_and_node_side_fast_forward_check(cli, tmp_path):
    repo = tmp_path / "repo"
    make_history(repo)
    pid = new_project(cli, "selected")
    only_main = cli.json("push", str(repo), "--project", pid, "--ref", "main", "--batch", "1")
    assert only_main["commits_sent"] == 6
    assert len(only_main["bundles"]) == 6
    assert set(refs_on_chain(cli, pid)) == {b"refs/heads/main"}

    # An unrelated repository does not know the chain's main: the node decides, and refuses.
    other = tmp_path / "other"
    other.mkdir()
    sh(other, "init", "-q", "-b", "main")
    commit(other, "unrelated", 1_700_002_000)
    refused = cli("push", str(other), "--project", pid, ok=False)
    assert refused.rc == 1
    assert refused.err.startswith("error: NOT_FAST_FORWARD:")
    forced = cli.json("push", str(other), "--project", pid, "--force")
    assert forced["refs"][0]["status"] == "forced"
    assert refs_on_chain(cli, pid)[b"refs/heads/main"][1] == 2


def test_push_dry_run_and_git_hash(cli, tmp_path):
    repo = tmp_path / "repo"
    ids = make_history(repo)
    pid = new_project(cli, "dry")
    plan = cli.json("push", str(repo), "--project", pid, "--dry-run")
    assert plan["dry_run"] and plan["commits_sent"] == 6
    assert refs_on_chain(cli, pid) == {}
    mapped = cli.json("git-hash", str(repo), "main", "light")["commits"]
    hashes = chain_hashes(repo)
    assert [(m["git"], m["hash"]) for m in mapped] == [
        (ids["merge"], "0x" + hashes[ids["merge"]].hex()),
        (ids["b1"], "0x" + hashes[ids["b1"]].hex()),
    ]
    text = cli("push", str(repo), "--project", pid)
    assert "pushed 6 commit(s) in 1 bundle(s)" in text.out
    assert " * refs/heads/main" in text.out
    assert text.err == ""  # no progress bar when stderr is not a terminal


def test_push_errors(cli, tmp_path):
    repo = tmp_path / "repo"
    make_history(repo)
    pid = new_project(cli, "errors")
    missing = cli("push", str(tmp_path / "nope"), "--project", pid, ok=False)
    assert missing.err.startswith("error: GIT_ERROR:")
    bad_ref = cli("push", str(repo), "--project", pid, "--ref", "nope", ok=False)
    assert bad_ref.err.startswith("error: GIT_ERROR:")
    batch = cli("push", str(repo), "--project", pid, "--batch", "0", ok=False)
    assert batch.err.startswith("error: INVALID_ARGUMENT:")
    unknown = cli("push", str(repo), "--project", "0x" + "ab" * 32, ok=False)
    assert unknown.err.startswith("error: NOT_FOUND:")


class FakeTty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_bar_text():
    stream = FakeTty()
    bar = Progress("pushing commits", 4, stream, enabled=True)
    bar.advance(2)
    bar.advance(2)
    bar.finish()
    text = stream.getvalue()
    assert text.endswith("\rpushing commits [" + "#" * 30 + "] 4/4\n")
    quiet = io.StringIO()
    Progress("x", 4, quiet, enabled=False).advance(4)
    assert quiet.getvalue() == ""
