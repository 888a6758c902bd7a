"""``chainctl push``: a local git repository's commits and refs onto a project; ``git-hash``."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import grpc

from chain.v1 import message_pb2 as pb
from chain.v1 import rpc_pb2, state_pb2
from node import constants as C
from node.cli.common import CliError, Context, Progress, SubParsers, hex0x
from node.cli.project import get_project
from node.sdk import git
from node.sdk.messages import MessageBuilder

DEFAULT_BUNDLE = 500
BUNDLES_PER_BATCH = 16


def register(sub: SubParsers) -> None:
    p = sub.add_parser("push", help="push a git repository's commits and branches/tags to a project")
    p.add_argument("repo_path")
    p.add_argument("--project", required=True, help="0x project id, OWNER/NAME or NAME")
    p.add_argument(
        "--ref", action="append", default=[], help="branch or tag to push (repeatable; default: all of them)"
    )
    p.add_argument("--force", action="store_true", help="allow non-fast-forward ref updates")
    p.add_argument(
        "--batch",
        type=int,
        default=DEFAULT_BUNDLE,
        help=f"commits per COMMIT_BUNDLE (1-1000, default {DEFAULT_BUNDLE})",
    )
    p.add_argument("--dry-run", action="store_true", help="show what would be sent; send nothing")
    p.set_defaults(func=push)

    p = sub.add_parser("git-hash", help="the chain hashes of git revisions (the push mapping)")
    p.add_argument("repo_path")
    p.add_argument("revs", nargs="*", default=["HEAD"])
    p.set_defaults(func=git_hash)


def open_repo(path: str) -> git.GitRepo:
    try:
        return git.GitRepo(path)
    except git.GitError as exc:
        raise CliError("GIT_ERROR", str(exc)) from None


@dataclass
class RefPlan:
    name: str
    sha: str
    new_hash: bytes
    current: state_pb2.Ref | None
    fast_forward: bool | None  # None: the chain's commit is not in the local repository

    @property
    def up_to_date(self) -> bool:
        return self.current is not None and bytes(self.current.hash) == self.new_hash

    @property
    def status(self) -> str:
        if self.up_to_date:
            return "up-to-date"
        if self.current is None:
            return "created"
        return "updated" if self.fast_forward else "forced"

    def to_json(self) -> dict[str, Any]:
        return {
            "ref": self.name,
            "git": self.sha,
            "old_hash": hex0x(bytes(self.current.hash)) if self.current is not None else None,
            "new_hash": hex0x(self.new_hash),
            "nonce": (self.current.nonce if self.current is not None else 0) + (0 if self.up_to_date else 1),
            "status": self.status,
        }

    def line(self) -> str:
        short = self.sha[:10]
        if self.up_to_date:
            return f" = {self.name}  {short} (up to date)"
        if self.current is None:
            return f" * {self.name}  {short} (new, nonce 1)"
        mark = "   " if self.fast_forward else " + "
        verb = "fast-forward" if self.fast_forward else "forced"
        return f"{mark}{self.name}  {short} ({verb}, nonce {self.current.nonce + 1})"


def chain_refs(ctx: Context, pid: bytes) -> dict[bytes, state_pb2.Ref]:
    refs: dict[bytes, state_pb2.Ref] = {}
    token = ""
    while True:
        req = rpc_pb2.ListRefsRequest(project_id=pid, page_size=C.MAX_PAGE_SIZE, page_token=token)
        resp = ctx.client.stub.ListRefs(req, timeout=ctx.timeout)
        for r in resp.refs:
            refs[bytes(r.name)] = r
        token = resp.next_page_token
        if not token:
            return refs


def get_commit(ctx: Context, pid: bytes, commit_hash: bytes) -> state_pb2.Commit | None:
    try:
        req = rpc_pb2.GetCommitRequest(project_id=pid, commit_hash=commit_hash)
        return ctx.client.stub.GetCommit(req, timeout=ctx.timeout).commit
    except grpc.RpcError as err:
        if isinstance(err, grpc.Call) and err.code() == grpc.StatusCode.NOT_FOUND:
            return None
        raise


def locate(ctx: Context, repo: git.GitRepo, pid: bytes, hashes: Sequence[bytes]) -> dict[bytes, str]:
    """Local git ids of chain commits: read from their ``content_digest`` and checked by re-mapping."""
    id_len = repo.id_len()
    claimed: dict[bytes, str] = {}
    for h in dict.fromkeys(hashes):
        commit = get_commit(ctx, pid, h)
        sha = git.git_id_of_content_digest(bytes(commit.content_digest), id_len) if commit is not None else None
        if sha is not None:
            claimed[h] = sha
    present = repo.existing_commits(list(claimed.values()))
    read = repo.read_commits([s for s in dict.fromkeys(claimed.values()) if s in present])
    return {h: sha for h, sha in claimed.items() if sha in read and read[sha].chain_hash == h}


def on_chain(ctx: Context, project: state_pb2.Project, hashes: Sequence[bytes]) -> set[bytes]:
    """Which of ``hashes`` the project already has: GetCommit each, or ListCommits when that is fewer calls."""
    pid = bytes(project.project_id)
    if not hashes or (project.commit_count == 0 and not project.forked_from):
        return set()
    pages = math.ceil(project.commit_count / C.MAX_PAGE_SIZE)
    if project.forked_from or len(hashes) <= pages:
        return {h for h in hashes if get_commit(ctx, pid, h) is not None}
    have: set[bytes] = set()
    token = ""
    while True:
        req = rpc_pb2.ListCommitsRequest(project_id=pid, page_size=C.MAX_PAGE_SIZE, page_token=token)
        resp = ctx.client.stub.ListCommits(req, timeout=ctx.timeout)
        have.update(bytes(c.hash) for c in resp.commits)
        token = resp.next_page_token
        if not token:
            break
    return have.intersection(hashes)


def _accepted(results: Sequence[rpc_pb2.SubmitResult]) -> list[bytes]:
    for r in results:
        if not r.accepted:
            raise CliError(r.reason_code or "REJECTED", r.detail or "message rejected")
    return [bytes(r.hash) for r in results]


def send_bundles(ctx: Context, b: MessageBuilder, pid: bytes, groups: Sequence[Sequence[pb.CommitMeta]]) -> list[bytes]:
    """Submit bundles (several per BatchSubmitMessages), then wait for each, with a progress bar."""
    progress = Progress("pushing commits", sum(len(g) for g in groups), ctx.err, ctx.progress_enabled)
    sent: list[tuple[bytes, int]] = []
    try:
        for start in range(0, len(groups), BUNDLES_PER_BATCH):
            chunk = groups[start : start + BUNDLES_PER_BATCH]
            hashes = _accepted(ctx.client.batch([b.commit_bundle(pid, list(g)) for g in chunk]))
            sent.extend(zip(hashes, (len(g) for g in chunk), strict=True))
        for h, n in sent:
            ctx.wait(h)
            progress.advance(n)
    finally:
        progress.finish()
    return [h for h, _ in sent]


def push(ctx: Context, args: Any) -> None:
    if not 1 <= args.batch <= C.MAX_COMMITS_PER_BUNDLE:
        raise CliError("INVALID_ARGUMENT", f"--batch must be 1-{C.MAX_COMMITS_PER_BUNDLE}")
    repo = open_repo(args.repo_path)
    try:
        _push(ctx, args, repo)
    except git.GitError as exc:
        raise CliError("GIT_ERROR", str(exc)) from None


def _push(ctx: Context, args: Any, repo: git.GitRepo) -> None:
    if repo.is_shallow():
        raise git.GitError("shallow repository: fetch the whole history first (git fetch --unshallow)")
    b = ctx.account_builder()
    pid = ctx.project_id(args.project)
    project = get_project(ctx, pid)

    if args.ref:
        local, skipped = repo.resolve_refs([repo.full_ref_name(r) for r in args.ref])
        if skipped:
            raise git.GitError(f"{', '.join(skipped)}: does not point at a commit")
    else:
        local, skipped = repo.refs()
        for name in skipped:
            ctx.note(f"skipping {name}: not a commit")
    if not local:
        raise CliError("NOTHING_TO_PUSH", "the repository has no branches or tags")
    for ref in local:
        if len(ref.name.encode("utf-8", errors="surrogateescape")) > C.MAX_REF_NAME_LEN:
            raise CliError("INVALID_ARGUMENT", f"ref name {ref.name!r} is longer than {C.MAX_REF_NAME_LEN} bytes")

    # Where the chain's refs are, and which of those commits this repository has.
    current = chain_refs(ctx, pid)
    tips = repo.read_commits(list(dict.fromkeys(r.sha for r in local)))
    plans: list[RefPlan] = []
    old_hashes = [bytes(cur.hash) for cur in current.values()]
    known = locate(ctx, repo, pid, old_hashes)
    for ref in local:
        cur = current.get(ref.name.encode("utf-8", errors="surrogateescape"))
        new_hash = tips[ref.sha].chain_hash
        ff: bool | None = None
        if cur is not None and bytes(cur.hash) != new_hash:
            old_sha = known.get(bytes(cur.hash))
            ff = repo.is_ancestor(old_sha, ref.sha) if old_sha is not None else None
        plans.append(RefPlan(ref.name, ref.sha, new_hash, cur, ff))
    rejected = [p.name for p in plans if p.fast_forward is False and not p.up_to_date]
    if rejected and not args.force:
        raise CliError(
            "NOT_FAST_FORWARD",
            f"{', '.join(rejected)}: the chain's commit is not an ancestor of the local one (use --force)",
        )

    # Commits to send: reachable from what moves, not from what the chain already has, in topological order.
    moving = [p.sha for p in plans if not p.up_to_date]
    candidates = repo.rev_list(moving, exclude=known.values())
    commits = repo.read_commits(candidates)
    hashes = {sha: c.chain_hash for sha, c in commits.items()}
    present = on_chain(ctx, project, [hashes[s] for s in candidates])
    new = [commits[s] for s in candidates if hashes[s] not in present]
    outside = [p for c in new for p in c.parents if p not in hashes]
    for sha, c in repo.read_commits(list(dict.fromkeys(outside))).items():
        hashes[sha] = c.chain_hash
    for c in new:
        if len(c.parents) > C.MAX_COMMIT_PARENTS:
            raise git.GitError(f"commit {c.sha} has {len(c.parents)} parents; the chain allows {C.MAX_COMMIT_PARENTS}")
    groups = git.bundles([c.meta(hashes) for c in new], args.batch)

    summary: dict[str, Any] = {
        "project_id": hex0x(pid),
        "commits_sent": len(new),
        "commits_already_on_chain": len(candidates) - len(new),
        "bundles": [],
        "refs": [p.to_json() for p in plans],
        "dry_run": bool(args.dry_run),
    }
    if args.dry_run:
        ctx.emit(summary, [f"would push {len(new)} commit(s) in {len(groups)} bundle(s)", *(p.line() for p in plans)])
        return

    bundle_hashes = send_bundles(ctx, b, pid, groups) if groups else []
    summary["bundles"] = [hex0x(h) for h in bundle_hashes]

    updates: list[pb.Message] = []
    for p in plans:
        if p.up_to_date:
            continue
        nonce = (p.current.nonce if p.current is not None else 0) + 1
        old = bytes(p.current.hash) if p.current is not None else b""
        force = bool(args.force) and p.current is not None and p.fast_forward is not True
        ref_bytes = p.name.encode("utf-8", errors="surrogateescape")
        updates.append(b.ref_update(pid, ref_bytes, p.new_hash, nonce, old_hash=old, force=force))
    for start in range(0, len(updates), C.MAX_BATCH_SUBMIT):
        ctx.submit(updates[start : start + C.MAX_BATCH_SUBMIT])
    lines = [f"pushed {len(new)} commit(s) in {len(bundle_hashes)} bundle(s) to {hex0x(pid)}"]
    ctx.emit(summary, [*lines, *(p.line() for p in plans)])


def git_hash(ctx: Context, args: Any) -> None:
    repo = open_repo(args.repo_path)
    try:
        shas = [repo.resolve(r) for r in args.revs]
        commits = repo.read_commits(list(dict.fromkeys(shas)))
    except git.GitError as exc:
        raise CliError("GIT_ERROR", str(exc)) from None
    docs = []
    for rev, sha in zip(args.revs, shas, strict=True):
        c = commits[sha]
        meta = c.meta({p: h.chain_hash for p, h in repo.read_commits(list(c.parents)).items()})
        docs.append(
            {
                "rev": rev,
                "git": sha,
                "hash": hex0x(bytes(meta.hash)),
                "parents": [hex0x(bytes(x)) for x in meta.parents],
                "tree_hash": hex0x(bytes(meta.tree_hash)),
                "title": meta.title,
            }
        )
    ctx.emit({"commits": docs}, [f"{d['git']}  {d['hash']}  {d['title']}" for d in docs])
