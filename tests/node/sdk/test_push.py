"""The SDK's programmatic push against a real chain-node subprocess, without chainctl."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest

from chain.v1 import rpc_pb2, service_pb2_grpc
from node.sdk import git
from node.sdk.push import BundleCommitted, PushError, RefSpec, parse_refspec, plan_push, push, submit_push
from node.sdk.rpc import ChainClient
from tests.fixtures.actors import RemoteActor, new_account
from tests.fixtures.nodeproc import NodeProcess
from tests.node.sdk.gitrepos import commit, make_history, sh


@dataclass
class World:
    node: NodeProcess
    client: ChainClient
    alice: RemoteActor
    bob: RemoteActor

    def project(self, name: str, owner: RemoteActor | None = None) -> bytes:
        msg = (owner or self.alice).b.project_create(name)
        self.client.commit(msg)
        return bytes(msg.hash)

    def refs(self, pid: bytes) -> dict[bytes, tuple[bytes, int]]:
        resp = self.client.stub.ListRefs(rpc_pb2.ListRefsRequest(project_id=pid))
        return {bytes(r.name): (bytes(r.hash), r.nonce) for r in resp.refs}


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> Iterator[World]:
    node = NodeProcess(tmp_path_factory.mktemp("sdk-push") / "data", "--web-addr", "").start()
    try:
        with node.client() as client:
            authority = node.authority()
            yield World(node, client, new_account(client, authority, 2), new_account(client, authority, 1))
    finally:
        node.stop()


def test_plan_sends_nothing_then_submit_reports_each_bundle(world, tmp_path):
    repo_path = tmp_path / "repo"
    ids = make_history(repo_path)
    repo = git.GitRepo(repo_path)
    pid = world.project("planned")

    plan = plan_push(world.client, repo, pid, bundle_size=4)
    assert [c.sha for c in plan.commits] == repo.rev_list(list(ids.values()))
    assert [len(b) for b in plan.bundles] == [4, 2]
    assert plan.already_on_chain == 0
    assert {p.name: (p.status, p.nonce) for p in plan.refs} == {
        "refs/heads/main": ("created", 1),
        "refs/heads/feature": ("created", 1),
        "refs/tags/v1": ("created", 1),
        "refs/tags/light": ("created", 1),
    }
    assert world.refs(pid) == {}  # planning sent nothing

    events: list[BundleCommitted] = []
    result = submit_push(world.client, world.alice.b, plan, on_bundle=events.append)
    assert [(e.index, e.total, e.commits) for e in events] == [(0, 2, 4), (1, 2, 2)]
    assert [e.message_hash for e in events] == result.bundle_hashes
    assert all(e.block_number > 0 for e in events)
    assert len(result.ref_update_hashes) == 4
    assert world.refs(pid) == {p.name.encode(): (p.new_hash, 1) for p in plan.refs}

    again = plan_push(world.client, repo, pid)
    assert (again.commits, again.bundles, again.moving) == ([], [], [])
    assert {p.status for p in again.refs} == {"up-to-date"}
    assert again.already_on_chain == 0
    nothing = submit_push(world.client, world.alice.b, again, on_bundle=events.append)
    assert (nothing.bundle_hashes, nothing.ref_update_hashes, len(events)) == ([], [], 2)


def test_rewritten_ref_needs_force_and_only_new_commits_go(world, tmp_path):
    repo_path = tmp_path / "repo"
    make_history(repo_path)
    repo = git.GitRepo(repo_path)
    pid = world.project("forced")
    push(world.client, world.alice.b, repo, pid, refs=["feature"])
    sh(repo_path, "checkout", "-q", "feature")
    sh(repo_path, "reset", "-q", "--hard", "HEAD~1")
    rewritten = commit(repo_path, "b2 rewritten", 1_700_003_000, "b.txt")

    with pytest.raises(PushError) as refused:
        plan_push(world.client, repo, pid, refs=["feature"])
    assert refused.value.reason == "NOT_FAST_FORWARD"
    assert refused.value.detail.startswith("refs/heads/feature")

    plan = plan_push(world.client, repo, pid, refs=["feature"], force=True)
    assert [c.sha for c in plan.commits] == [rewritten]
    assert plan.already_on_chain == 0
    assert [(p.status, p.nonce) for p in plan.refs] == [("forced", 2)]
    submit_push(world.client, world.alice.b, plan)
    log = world.client.stub.GetRefLog(rpc_pb2.GetRefLogRequest(project_id=pid, ref_name=b"refs/heads/feature")).entries
    assert [(e.nonce, e.force) for e in log] == [(2, True), (1, False)]


def test_refusals_carry_reason_codes(world, tmp_path: Path):
    empty = tmp_path / "empty"
    empty.mkdir()
    sh(empty, "init", "-q", "-b", "main")
    pid = world.project("refusals")
    with pytest.raises(PushError) as nothing:
        plan_push(world.client, git.GitRepo(empty), pid)
    assert nothing.value.reason == "NOTHING_TO_PUSH"
    with pytest.raises(PushError) as size:
        plan_push(world.client, git.GitRepo(empty), pid, bundle_size=0)
    assert size.value.reason == "INVALID_ARGUMENT"

    # Bob may not write to Alice's project: the node rejects the first bundle and nothing moves.
    repo_path = tmp_path / "repo"
    make_history(repo_path)
    plan = plan_push(world.client, git.GitRepo(repo_path), pid)
    events: list[BundleCommitted] = []
    with pytest.raises(PushError) as rejected:
        submit_push(world.client, world.bob.b, plan, on_bundle=events.append)
    assert rejected.value.reason == "PERMISSION_DENIED"
    assert events == []
    assert world.refs(pid) == {}


def test_refspecs_deletes_and_per_ref_results(world, tmp_path: Path):
    """strict=False (the git remote helper's mode): refusals per ref instead of one exception."""
    repo_path = tmp_path / "repo"
    ids = make_history(repo_path)
    repo = git.GitRepo(repo_path)
    pid = world.project("refspecs")
    push(world.client, world.alice.b, repo, pid, refs=["refs/heads/main:refs/heads/main", "feature", "v1"])
    assert set(world.refs(pid)) == {b"refs/heads/main", b"refs/heads/feature", b"refs/tags/v1"}

    # feature rewritten locally; main deleted on chain; a missing ref "deleted" too.
    sh(repo_path, "checkout", "-q", "feature")
    sh(repo_path, "reset", "-q", "--hard", "HEAD~1")
    commit(repo_path, "b2 rewritten", 1_700_004_000, "b.txt")
    specs = ["refs/heads/feature:refs/heads/feature", ":refs/heads/main", ":refs/heads/nope"]
    with pytest.raises(PushError) as strict:
        plan_push(world.client, repo, pid, refs=specs)
    assert strict.value.reason == "REF_NOT_FOUND"
    plan = plan_push(world.client, repo, pid, refs=specs, strict=False)
    assert plan.refused == {"refs/heads/feature": "non-fast-forward", "refs/heads/nope": "remote ref does not exist"}
    assert plan.moving == [] and plan.commits == []
    assert [(d.name, d.nonce) for d in plan.deletes] == [("refs/heads/main", 2)]
    result = submit_push(world.client, world.alice.b, plan, strict=False)
    assert result.ref_errors == {}
    assert set(world.refs(pid)) == {b"refs/heads/feature", b"refs/tags/v1"}

    # A per-ref force (+) moves feature; --prune-style deletion of refs the repository lacks.
    sh(repo_path, "tag", "-d", "v1")
    plan = plan_push(world.client, repo, pid, refs=["+feature"], prune=True)
    assert [(p.name, p.status) for p in plan.refs] == [("refs/heads/feature", "forced")]
    assert [d.name for d in plan.deletes] == ["refs/tags/v1"]
    submit_push(world.client, world.alice.b, plan)
    assert set(world.refs(pid)) == {b"refs/heads/feature"}
    assert ids["root"] in repo.rev_list([sh(repo_path, "rev-parse", "feature")])


class Recorder(grpc.UnaryUnaryClientInterceptor):  # type: ignore[type-arg]
    """The method and metadata of every unary call made through it."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, str]]] = []

    def intercept_unary_unary(self, continuation: Callable[..., Any], details: Any, request: Any) -> Any:
        self.calls.append((details.method.rsplit("/", 1)[1], dict(details.metadata or ())))
        return continuation(details, request)


def test_a_plan_reads_the_chain_linearizably(world, tmp_path: Path):
    """Every read a plan is made of asks for the ordered log's state (`chain-read-consistency: linearizable`):
    through a follower behind the log a plan would carry stale ref nonces. Without PLAN_READ this fails."""
    repo_path = tmp_path / "repo"
    make_history(repo_path)
    pid = world.project("planned-from-the-log")
    recorder = Recorder()
    with ChainClient(world.node.grpc_target) as client:
        client.stub = service_pb2_grpc.ChainServiceStub(grpc.intercept_channel(client.channel, recorder))
        push(client, world.alice.b, git.GitRepo(repo_path), pid, refs=["main"])  # plan, then send
        plan_push(client, git.GitRepo(repo_path), pid, refs=["main"])  # again: now reading refs and commits
    reads = [(m, md) for m, md in recorder.calls if m.startswith(("Get", "List"))]
    planned = {m for m, _ in reads}
    assert {"GetProject", "ListRefs", "GetCommit"} <= planned, planned
    assert all(md.get("chain-read-consistency") == "linearizable" for m, md in reads if m != "GetMessage"), reads
    assert b"refs/heads/main" in world.refs(pid)


def test_parse_refspec():
    assert parse_refspec("main") == RefSpec("main", "main", False)
    assert parse_refspec("+a:refs/heads/b") == RefSpec("a", "refs/heads/b", True)
    assert parse_refspec(":old") == RefSpec(None, "old", False)
    for bad in ("", "a:", "+:x", ":"):
        with pytest.raises(PushError):
            parse_refspec(bad)
