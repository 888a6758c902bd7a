"""What a push left on chain, read back for the push tests: refs, commits, and the local mapping."""

from __future__ import annotations

from pathlib import Path

from chain.v1 import rpc_pb2
from node.sdk import git
from tests.node.cli.runner import Cli


def new_project(cli: Cli, name: str) -> str:
    return str(cli.json("project", "create", name)["project_id"])


def chain_hashes(repo_path: Path) -> dict[str, bytes]:
    repo = git.GitRepo(repo_path)
    refs, _ = repo.refs()
    order = repo.rev_list([r.sha for r in refs])
    return {sha: c.chain_hash for sha, c in repo.read_commits(order).items()}


def refs_on_chain(cli: Cli, pid: str) -> dict[bytes, tuple[bytes, int]]:
    resp = cli.node.client().stub.ListRefs(rpc_pb2.ListRefsRequest(project_id=bytes.fromhex(pid[2:])))
    return {bytes(r.name): (bytes(r.hash), r.nonce) for r in resp.refs}


def commits_on_chain(cli: Cli, pid: str) -> list[bytes]:
    out: list[bytes] = []
    token = ""
    stub = cli.node.client().stub
    while True:
        req = rpc_pb2.ListCommitsRequest(project_id=bytes.fromhex(pid[2:]), page_size=200, page_token=token)
        resp = stub.ListCommits(req)
        out.extend(bytes(c.hash) for c in resp.commits)
        token = resp.next_page_token
        if not token:
            return out


def every_commit(cli: Cli, pid: str) -> dict[bytes, tuple[tuple[bytes, ...], str, int]]:
    """hash -> (parents, title, author time) of every commit ListCommits has, page by page."""
    out: dict[bytes, tuple[tuple[bytes, ...], str, int]] = {}
    token, stub = "", cli.node.client().stub
    while True:
        req = rpc_pb2.ListCommitsRequest(project_id=bytes.fromhex(pid[2:]), page_size=200, page_token=token)
        resp = stub.ListCommits(req)
        for c in resp.commits:
            out[bytes(c.hash)] = (tuple(bytes(p) for p in c.parents), c.title, c.author_timestamp)
        token = resp.next_page_token
        if not token:
            return out


def every_ref(cli: Cli, pid: str) -> dict[bytes, bytes]:
    out: dict[bytes, bytes] = {}
    token, stub = "", cli.node.client().stub
    while True:
        req = rpc_pb2.ListRefsRequest(project_id=bytes.fromhex(pid[2:]), page_size=200, page_token=token)
        resp = stub.ListRefs(req)
        out.update((bytes(r.name), bytes(r.hash)) for r in resp.refs)
        token = resp.next_page_token
        if not token:
            return out
