"""Push a local git repository onto a project: plan the bundles and ref updates, then submit them.

    with ChainClient("localhost:50051") as client:
        builder = MessageBuilder(owner, signer, network=pb.NETWORK_DEVNET)
        plan = plan_push(client, GitRepo("path/to/repo"), project_id)
        result = submit_push(client, builder, plan, on_bundle=lambda e: print(e.index + 1, "/", e.total))

``refs`` are git refspecs: ``main``, ``refs/tags/v1``, ``SRC:DST`` (push the local revision SRC to the
chain ref DST), ``:DST`` (delete DST on chain, a REF_DELETE), a leading ``+`` forces that one ref; no
refspec pushes every branch and tag (unless only deletions are given). ``prune=True`` also deletes the
chain's branches and tags that the repository no longer has.

``plan_push`` reads the repository and the project's refs and commits on chain (linearizable reads,
``PLAN_READ``: the state the ordered log has, also through a follower) and sends nothing: which
refs move (created, fast-forward, forced or up to date, with the nonce each update will carry) and which
commits the project lacks, in topological order, cut into COMMIT_BUNDLE-sized groups. ``submit_push``
signs and submits the bundles (several per BatchSubmitMessages), waits for each to commit, reporting
every committed bundle to ``on_bundle``, then submits the REF_UPDATEs and waits for them. ``push`` does
both. ``chainctl push`` is a thin wrapper over these.

Failures: ``GitError`` (the repository), ``PushError`` (a refusal with a stable ``reason``: NOTHING_TO_PUSH,
INVALID_ARGUMENT, NOT_FAST_FORWARD, or the node's reason code for a rejected message), ``Dropped`` and
``TimeoutError`` (from node.sdk.rpc, while waiting for a commit), ``grpc.RpcError`` (a failed call). A batch
the node cannot tell the outcome of (``OutcomeUnknown``: a member forwarded it and got no answer) is waited
for like an accepted one: it commits, or ``Dropped`` says why.
With ``strict=False`` (the git remote helper) a ref that cannot move is not an error: it is listed in
``PushPlan.refused`` with git's wording (``non-fast-forward``, ``remote ref does not exist``) and
``submit_push`` records a rejected message in ``PushResult.ref_errors`` instead of raising.
Without ``force`` a ref whose chain commit is not an ancestor of the local one is refused here; a chain
commit this repository does not have is left for the node to judge (it refuses a non-fast-forward).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import grpc

from chain.v1 import message_pb2 as pb
from chain.v1 import rpc_pb2, state_pb2
from node import constants as C
from node.errors import CHAIN_READ_CONSISTENCY, LINEARIZABLE, CliCode, Reason
from node.sdk import git
from node.sdk.calls import unknown_hashes
from node.sdk.errors import OutcomeUnknown
from node.sdk.messages import MessageBuilder
from node.sdk.rpc import ChainClient, Dropped
from node.sdk.staging import STAGING_PREFIX, StagingRefs, needs_staging, tips_to_stage

DEFAULT_BUNDLE = 500
BUNDLES_PER_BATCH = 16
COMMIT_TIMEOUT = 60.0
# Every read a plan is made of (the project, its refs, which commits it has) asks for the ordered log's state
# (docs/replication.md, consistent reads): a member behind the log would give stale ref nonces and hashes, and
# the push would be refused, or would miss a push that just committed elsewhere.
PLAN_READ = ((CHAIN_READ_CONSISTENCY, LINEARIZABLE),)


class PushError(Exception):
    """A push refused before or at submission; ``reason`` is a stable code."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


def ref_bytes(name: str) -> bytes:
    """A local ref name as the chain stores it (undecodable bytes kept as they are)."""
    return name.encode("utf-8", errors="surrogateescape")


@dataclass(frozen=True)
class RefPlan:
    """One local ref against the chain's ref of the same name."""

    name: str
    sha: str  # the local commit (git id)
    new_hash: bytes  # its chain hash
    current: state_pb2.Ref | None  # the chain's ref, if any
    fast_forward: bool | None  # None: the chain's commit is not in the local repository
    force: bool = False  # this ref may move to a commit that does not descend from the chain's

    @property
    def rejected(self) -> bool:
        """A rewrite the plan refuses: not a fast-forward and not forced."""
        return self.fast_forward is False and not self.up_to_date and not self.force

    @property
    def up_to_date(self) -> bool:
        return self.current is not None and bytes(self.current.hash) == self.new_hash

    @property
    def status(self) -> str:
        """``up-to-date``, ``created``, ``updated`` (fast-forward) or ``forced``."""
        if self.up_to_date:
            return "up-to-date"
        if self.current is None:
            return "created"
        return "updated" if self.fast_forward else "forced"

    @property
    def old_hash(self) -> bytes:
        return bytes(self.current.hash) if self.current is not None else b""

    @property
    def nonce(self) -> int:
        """The nonce the REF_UPDATE carries (the chain's current one when nothing moves)."""
        current = self.current.nonce if self.current is not None else 0
        return current + (0 if self.up_to_date else 1)


@dataclass(frozen=True)
class RefDeletePlan:
    """A chain ref the push deletes (REF_DELETE, compare-and-swap on its hash and nonce)."""

    name: str  # as ``RefPlan.name``: undecodable bytes kept by surrogateescape
    current: state_pb2.Ref

    @property
    def nonce(self) -> int:
        return self.current.nonce + 1

    @property
    def old_hash(self) -> bytes:
        return bytes(self.current.hash)


@dataclass(frozen=True)
class RefSpec:
    """One git refspec: ``[+]SRC[:DST]``; ``src`` is None for a deletion (``:DST``)."""

    src: str | None
    dst: str
    force: bool = False


def parse_refspec(text: str) -> RefSpec:
    force = text.startswith("+")
    body = text[1:] if force else text
    src, sep, dst = body.partition(":")
    if not sep:
        dst = src
    if not dst or (sep and not src and force):
        raise PushError(CliCode.INVALID_ARGUMENT, f"refspec {text!r}: expected [+]SRC[:DST] or :DST")
    return RefSpec(src or None, dst, force)


@dataclass(frozen=True)
class PushPlan:
    """What a push sends: computed by ``plan_push``, sent by ``submit_push``."""

    project_id: bytes
    refs: list[RefPlan]
    commits: list[git.GitCommit]  # the commits the project lacks, parents first
    already_on_chain: int  # commits reachable from the moving refs that the project has
    bundles: list[list[pb.CommitMeta]]  # ``commits`` cut into COMMIT_BUNDLE bodies
    force: bool = False
    deletes: list[RefDeletePlan] = field(default_factory=list)
    refused: dict[str, str] = field(default_factory=dict)  # ref -> why (strict=False only)
    stage: list[list[bytes]] = field(default_factory=list)  # per bundle but the last: the tips staging refs hold
    staging_on_chain: dict[bytes, state_pb2.Ref] = field(default_factory=dict)  # an interrupted push's (staging.py)

    @property
    def moving(self) -> list[RefPlan]:
        return [p for p in self.refs if not p.up_to_date and not p.rejected]

    def ref_deletes(self, builder: MessageBuilder) -> list[pb.Message]:
        return [
            builder.ref_delete(self.project_id, ref_bytes(d.name), d.nonce, old_hash=d.old_hash) for d in self.deletes
        ]

    def ref_updates(self, builder: MessageBuilder) -> list[pb.Message]:
        """Signed REF_UPDATEs for the refs that move (``force`` only where it is not a fast-forward)."""
        return [
            builder.ref_update(
                self.project_id,
                ref_bytes(p.name),
                p.new_hash,
                p.nonce,
                old_hash=p.old_hash,
                force=(self.force or p.force) and p.current is not None and p.fast_forward is not True,
            )
            for p in self.moving
        ]


@dataclass(frozen=True)
class BundleCommitted:
    """Progress: bundle ``index`` (0-based) of ``total`` is committed."""

    index: int
    total: int
    commits: int
    message_hash: bytes
    block_number: int


@dataclass
class PushResult:
    plan: PushPlan
    bundle_hashes: list[bytes] = field(default_factory=list)
    ref_update_hashes: list[bytes] = field(default_factory=list)
    ref_errors: dict[str, str] = field(default_factory=dict)  # ref -> "REASON: detail" (strict=False)
    staging_left: str = ""  # why staging refs were left on chain (the next push deletes them); "" none


# ---- reading the chain ----


def _chain_refs(client: ChainClient, pid: bytes) -> dict[bytes, state_pb2.Ref]:
    refs: dict[bytes, state_pb2.Ref] = {}
    token = ""
    while True:
        req = rpc_pb2.ListRefsRequest(project_id=pid, page_size=C.MAX_PAGE_SIZE, page_token=token)
        resp = client.stub.ListRefs(req, timeout=client.timeout, metadata=PLAN_READ)
        for r in resp.refs:
            refs[bytes(r.name)] = r
        token = resp.next_page_token
        if not token:
            return refs


def _get_commit(client: ChainClient, pid: bytes, commit_hash: bytes) -> state_pb2.Commit | None:
    try:
        req = rpc_pb2.GetCommitRequest(project_id=pid, commit_hash=commit_hash)
        return client.stub.GetCommit(req, timeout=client.timeout, metadata=PLAN_READ).commit
    except grpc.RpcError as err:
        if isinstance(err, grpc.Call) and err.code() == grpc.StatusCode.NOT_FOUND:
            return None
        raise


def _locate(client: ChainClient, repo: git.GitRepo, pid: bytes, hashes: Sequence[bytes]) -> dict[bytes, str]:
    """Local git ids of chain commits: read from their ``content_digest`` and checked by re-mapping."""
    id_len = repo.id_len()
    claimed: dict[bytes, str] = {}
    for h in dict.fromkeys(hashes):
        commit = _get_commit(client, pid, h)
        sha = git.git_id_of_content_digest(bytes(commit.content_digest), id_len) if commit is not None else None
        if sha is not None:
            claimed[h] = sha
    present = repo.existing_commits(list(claimed.values()))
    read = repo.read_commits([s for s in dict.fromkeys(claimed.values()) if s in present])
    return {h: sha for h, sha in claimed.items() if sha in read and read[sha].chain_hash == h}


def _on_chain(client: ChainClient, project: state_pb2.Project, hashes: Sequence[bytes]) -> set[bytes]:
    """Which of ``hashes`` the project already has: GetCommit each, or ListCommits when that is fewer calls."""
    pid = bytes(project.project_id)
    if not hashes or (project.commit_count == 0 and not project.forked_from):
        return set()
    pages = math.ceil(project.commit_count / C.MAX_PAGE_SIZE)
    if project.forked_from or len(hashes) <= pages:
        return {h for h in hashes if _get_commit(client, pid, h) is not None}
    have: set[bytes] = set()
    token = ""
    while True:
        req = rpc_pb2.ListCommitsRequest(project_id=pid, page_size=C.MAX_PAGE_SIZE, page_token=token)
        resp = client.stub.ListCommits(req, timeout=client.timeout, metadata=PLAN_READ)
        have.update(bytes(c.hash) for c in resp.commits)
        token = resp.next_page_token
        if not token:
            break
    return have.intersection(hashes)


# ---- planning ----


def check_full_history(repo: git.GitRepo) -> None:
    """A shallow clone cannot be pushed: its oldest commits name parents it does not have."""
    if repo.is_shallow():
        raise git.GitError("shallow repository: fetch the whole history first (git fetch --unshallow)")


def _dst_name(repo: git.GitRepo, spec: RefSpec) -> str:
    """The full chain ref a refspec's DST names (``main`` -> ``refs/heads/main``, a tag's name under tags)."""
    if spec.dst.startswith("refs/"):
        return spec.dst
    if spec.src == spec.dst:
        return repo.full_ref_name(spec.dst)
    src_tag = (
        spec.src is not None and not spec.src.startswith("refs/heads/") and repo.ref_exists(f"refs/tags/{spec.src}")
    )
    return ("refs/tags/" if src_tag or (spec.src or "").startswith("refs/tags/") else "refs/heads/") + spec.dst


def _local_refs(
    repo: git.GitRepo, specs: Sequence[RefSpec], on_skip: Callable[[str], None]
) -> tuple[list[git.LocalRef], set[str]]:
    """The refs to push (named DST, pointing at SRC's commit) and which of them are forced."""
    pushes = [s for s in specs if s.src is not None]
    forced: set[str] = set()
    if pushes:
        local: list[git.LocalRef] = []
        for spec in pushes:
            dst = _dst_name(repo, spec)
            src = repo.full_ref_name(spec.src) if spec.src == spec.dst else spec.src
            found, skipped = repo.resolve_refs([src or dst])
            if skipped:
                raise git.GitError(f"{', '.join(skipped)}: does not point at a commit")
            local.append(git.LocalRef(dst, found[0].sha))
            if spec.force:
                forced.add(dst)
    elif specs:
        return [], forced  # deletions only
    else:
        local, skipped = repo.refs()
        for name in skipped:
            on_skip(name)
    if not local:
        raise PushError(CliCode.NOTHING_TO_PUSH, "the repository has no branches or tags")
    for ref in local:
        if len(ref_bytes(ref.name)) > C.MAX_REF_NAME_LEN:
            raise PushError(
                CliCode.INVALID_ARGUMENT, f"ref name {ref.name!r} is longer than {C.MAX_REF_NAME_LEN} bytes"
            )
    return local, forced


def _deletes(
    repo: git.GitRepo, specs: Sequence[RefSpec], prune: bool, current: dict[bytes, state_pb2.Ref]
) -> tuple[list[RefDeletePlan], dict[str, str]]:
    """REF_DELETEs for ``:DST`` refspecs and, with ``prune``, for chain branches/tags missing locally."""
    plans: dict[str, RefDeletePlan] = {}
    missing: dict[str, str] = {}
    for spec in specs:
        if spec.src is not None:
            continue
        names = [spec.dst] if spec.dst.startswith("refs/") else [p + spec.dst for p in git.DEFAULT_REF_PREFIXES]
        hit = next((n for n in names if ref_bytes(n) in current), None)
        if hit is None:
            missing[names[0]] = "remote ref does not exist"
        else:
            plans[hit] = RefDeletePlan(hit, current[ref_bytes(hit)])
    if prune:
        local, skipped = repo.refs()
        have = {ref_bytes(r.name) for r in local} | {ref_bytes(n) for n in skipped}
        prefixes = tuple(p.encode() for p in git.DEFAULT_REF_PREFIXES)
        for name, ref in current.items():
            if name.startswith(prefixes) and name not in have:
                text = name.decode("utf-8", errors="surrogateescape")
                plans[text] = RefDeletePlan(text, ref)
    return list(plans.values()), missing


def _ref_plans(
    repo: git.GitRepo, local: Sequence[git.LocalRef], current: dict[bytes, state_pb2.Ref], known: dict[bytes, str]
) -> list[RefPlan]:
    tips = repo.read_commits(list(dict.fromkeys(r.sha for r in local)))
    plans: list[RefPlan] = []
    for ref in local:
        cur = current.get(ref_bytes(ref.name))
        new_hash = tips[ref.sha].chain_hash
        ff: bool | None = None
        if cur is not None and bytes(cur.hash) != new_hash:
            old_sha = known.get(bytes(cur.hash))
            ff = repo.is_ancestor(old_sha, ref.sha) if old_sha is not None else None
        plans.append(RefPlan(ref.name, ref.sha, new_hash, cur, ff))
    return plans


def _missing_commits(
    client: ChainClient, repo: git.GitRepo, project: state_pb2.Project, tips: Sequence[str], known: Sequence[str]
) -> tuple[list[git.GitCommit], int, dict[str, bytes]]:
    """Commits reachable from ``tips``, not from ``known``, that the project lacks (parents first); how many
    it already had; the chain hash of every commit they and their parents name."""
    candidates = repo.rev_list(tips, exclude=known)
    commits = repo.read_commits(candidates)
    hashes = {sha: c.chain_hash for sha, c in commits.items()}
    present = _on_chain(client, project, [hashes[s] for s in candidates])
    new = [commits[s] for s in candidates if hashes[s] not in present]
    outside = [p for c in new for p in c.parents if p not in hashes]
    for sha, c in repo.read_commits(list(dict.fromkeys(outside))).items():
        hashes[sha] = c.chain_hash
    for c in new:
        if len(c.parents) > C.MAX_COMMIT_PARENTS:
            raise git.GitError(f"commit {c.sha} has {len(c.parents)} parents; the chain allows {C.MAX_COMMIT_PARENTS}")
    return new, len(candidates) - len(new), hashes


def plan_push(
    client: ChainClient,
    repo: git.GitRepo,
    project_id: bytes,
    *,
    refs: Sequence[str] = (),
    force: bool = False,
    prune: bool = False,
    strict: bool = True,
    bundle_size: int = DEFAULT_BUNDLE,
    on_skip: Callable[[str], None] = lambda name: None,
) -> PushPlan:
    """Plan a push of ``refs`` (refspecs, see the module doc; default: every branch and tag).

    Reads only: nothing is signed or sent. ``on_skip`` hears of refs that do not lead to a commit (when
    pushing every ref). Raises ``PushError`` NOT_FAST_FORWARD for a rewritten ref unless forced, and
    REF_NOT_FOUND for a deletion of a ref the chain does not have (both only when ``strict``)."""
    if not 1 <= bundle_size <= C.MAX_COMMITS_PER_BUNDLE:
        raise PushError(CliCode.INVALID_ARGUMENT, f"bundle size must be 1-{C.MAX_COMMITS_PER_BUNDLE}")
    specs = [parse_refspec(r) for r in refs]
    check_full_history(repo)
    req = rpc_pb2.GetProjectRequest(project_id=project_id)
    project = client.stub.GetProject(req, timeout=client.timeout, metadata=PLAN_READ).project
    local, forced = _local_refs(repo, specs, on_skip)
    # Where the chain's refs are, and which of those commits this repository has.
    current = _chain_refs(client, project_id)
    deletes, refused = _deletes(repo, specs, prune, current)
    known = _locate(client, repo, project_id, [bytes(cur.hash) for cur in current.values()])
    plans = [replace(p, force=force or p.name in forced) for p in _ref_plans(repo, local, current, known)]
    refused.update({p.name: "non-fast-forward" for p in plans if p.rejected})
    if strict and refused:
        gone = [n for n, why in refused.items() if why != "non-fast-forward"]
        if gone:
            raise PushError(Reason.REF_NOT_FOUND, f"{', '.join(gone)}: the chain has no such ref to delete")
        raise PushError(
            "NOT_FAST_FORWARD",
            f"{', '.join(refused)}: the chain's commit is not an ancestor of the local one (use --force)",
        )
    moving = [p.sha for p in plans if not p.up_to_date and not p.rejected]
    new, already, hashes = _missing_commits(client, repo, project, moving, list(known.values()))
    groups = git.bundles([c.meta(hashes) for c in new], bundle_size)
    staged = {n: r for n, r in current.items() if n.startswith(STAGING_PREFIX)}
    stage = tips_to_stage(groups) if needs_staging(project, len(new), len(groups)) else []
    created = sum(1 for p in plans if p.current is None and not p.rejected)
    _check_ref_room(len(current) - len(staged) + created, max(map(len, stage), default=0), len(staged))
    return PushPlan(project_id, plans, new, already, groups, force, deletes, refused, stage, staged)


def _check_ref_room(refs: int, staging: int, staged: int) -> None:
    """The refs the project will have, with the staging refs the push holds at most at once, fit the limit."""
    if staging and refs + max(staging, staged) > C.MAX_REFS_PER_PROJECT:
        raise PushError(
            Reason.LIMIT_EXCEEDED,
            f"the push needs {staging} staging ref(s) to keep its commits from pruning beside the project's "
            f"{refs} ref(s): at most {C.MAX_REFS_PER_PROJECT} refs per project; push fewer refs at a time",
        )


# ---- submitting ----


def _batch(client: ChainClient, msgs: Sequence[pb.Message]) -> list[rpc_pb2.SubmitResult]:
    """`client.batch(msgs)`; when the node cannot tell what became of them (OutcomeUnknown: it forwarded them
    and got no answer), each is taken as sent: waiting for it then says whether it committed or was dropped."""
    try:
        return client.batch(msgs)
    except OutcomeUnknown as err:
        hashes = unknown_hashes(err, msgs)
        return [rpc_pb2.SubmitResult(index=i, hash=h, accepted=True) for i, h in enumerate(hashes)]


def _accepted(results: Sequence[rpc_pb2.SubmitResult]) -> list[bytes]:
    for r in results:
        if not r.accepted:
            raise PushError(r.reason_code or "REJECTED", r.detail or "message rejected")
    return [bytes(r.hash) for r in results]


def _send_bundles(
    client: ChainClient,
    builder: MessageBuilder,
    plan: PushPlan,
    staging: StagingRefs,
    on_bundle: Callable[[BundleCommitted], None],
    timeout: float,
) -> list[bytes]:
    """Submit every bundle, each followed by the staging updates that protect what it sent (staging.py), in
    order, BUNDLES_PER_BATCH bundles (and at most MAX_BATCH_SUBMIT messages) per call; then wait for each
    in order."""
    groups = plan.bundles
    messages: list[tuple[int | None, pb.Message]] = []  # (bundle index, or None: a staging update)
    for index, group in enumerate(groups):
        messages.append((index, builder.commit_bundle(plan.project_id, list(group))))
        if index < len(plan.stage):
            messages.extend((None, m) for m in staging.point_at(builder, plan.stage[index]))
    sent: list[tuple[int | None, bytes]] = []
    chunk: list[tuple[int | None, pb.Message]] = []
    for item in messages:
        bundles_in = sum(1 for i, _ in chunk if i is not None)
        if chunk and (len(chunk) >= C.MAX_BATCH_SUBMIT or (item[0] is not None and bundles_in >= BUNDLES_PER_BATCH)):
            sent.extend(zip([i for i, _ in chunk], _accepted(_batch(client, [m for _, m in chunk])), strict=True))
            chunk = []
        chunk.append(item)
    if chunk:
        sent.extend(zip([i for i, _ in chunk], _accepted(_batch(client, [m for _, m in chunk])), strict=True))
    bundle_hashes: list[bytes] = []
    for bundle, h in sent:
        committed = client.wait_committed(h, timeout=timeout)
        if bundle is not None:
            bundle_hashes.append(h)
            on_bundle(BundleCommitted(bundle, len(groups), len(groups[bundle]), h, int(committed.block_number)))
    return bundle_hashes


def submit_push(
    client: ChainClient,
    builder: MessageBuilder,
    plan: PushPlan,
    *,
    on_bundle: Callable[[BundleCommitted], None] = lambda event: None,
    timeout: float = COMMIT_TIMEOUT,
    strict: bool = True,
) -> PushResult:
    """Send a plan: its bundles (each reported to ``on_bundle`` once committed), then its ref updates.

    ``builder`` signs as the pushing account (owner and delegated key). Returns once every message is
    committed; ``timeout`` bounds the wait for each."""
    result = PushResult(plan)
    staging = StagingRefs.on_chain(plan.project_id, plan.staging_on_chain)
    result.bundle_hashes = _send_bundles(client, builder, plan, staging, on_bundle, timeout)
    names = [p.name for p in plan.moving] + [d.name for d in plan.deletes]
    messages = plan.ref_updates(builder) + plan.ref_deletes(builder)
    for start in range(0, len(messages), C.MAX_BATCH_SUBMIT):
        chunk = list(zip(names[start:], _batch(client, messages[start : start + C.MAX_BATCH_SUBMIT]), strict=False))
        if strict:
            _accepted([r for _, r in chunk])
        for name, r in chunk:
            if not r.accepted:
                result.ref_errors[name] = f"{r.reason_code or 'REJECTED'}: {r.detail or 'message rejected'}"
                continue
            try:
                client.wait_committed(bytes(r.hash), timeout=timeout)
            except (Dropped, TimeoutError) as exc:
                if strict:
                    raise
                result.ref_errors[name] = str(exc)
                continue
            result.ref_update_hashes.append(bytes(r.hash))
    # the staging refs go once the push's own refs hold what it sent (and before any other bundle of its own)
    cleanup = staging.deletes(builder)
    try:
        for start in range(0, len(cleanup), C.MAX_BATCH_SUBMIT):
            for h in _accepted(_batch(client, cleanup[start : start + C.MAX_BATCH_SUBMIT])):
                client.wait_committed(h, timeout=timeout)
    except (PushError, Dropped, TimeoutError) as exc:  # harmless: they protect commits the refs hold anyway
        result.staging_left = str(exc)
    return result


def push(
    client: ChainClient,
    builder: MessageBuilder,
    repo: git.GitRepo,
    project_id: bytes,
    *,
    refs: Sequence[str] = (),
    force: bool = False,
    prune: bool = False,
    bundle_size: int = DEFAULT_BUNDLE,
    on_bundle: Callable[[BundleCommitted], None] = lambda event: None,
) -> PushResult:
    """``plan_push`` then ``submit_push``."""
    plan = plan_push(client, repo, project_id, refs=refs, force=force, prune=prune, bundle_size=bundle_size)
    return submit_push(client, builder, plan, on_bundle=on_bundle)
