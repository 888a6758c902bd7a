"""Git-object handlers: compare-and-swap refs with per-ref nonces, commit bundles."""

from __future__ import annotations

from collections import deque

from chain.v1 import message_pb2 as pb
from chain.v1 import state_pb2
from node import constants as C
from node.errors import MessageRejected, Reason
from node.state.access import StateAccess
from node.state.authz import live_project, require_permission
from node.state.context import MessageContext
from node.state.handlers.pruning import last_sequence, prune_commits, record_sequence
from node.state.rules import check_limit
from node.storage import schema

MAX_FORK_DEPTH = 16


def find_commit(st: StateAccess, project: state_pb2.Project, commit_hash: bytes) -> state_pb2.Commit | None:
    """A commit of the project, or of the project it was forked from (transitively)."""
    current: state_pb2.Project | None = project
    for _ in range(MAX_FORK_DEPTH):
        if current is None:
            return None
        commit = st.commit(current.project_id, commit_hash)
        if commit is not None:
            return commit
        if not current.forked_from:
            return None
        current = st.project(current.forked_from)
    return None


def is_ancestor(st: StateAccess, project: state_pb2.Project, ancestor: bytes, descendant: bytes) -> bool:
    """Whether `ancestor` is reachable from `descendant` over parent links (bounded walk)."""
    if ancestor == descendant:
        return True
    seen = {descendant}
    queue = deque([descendant])
    while queue:
        commit = find_commit(st, project, queue.popleft())
        if commit is None:
            continue
        for parent in commit.parents:
            if parent == ancestor:
                return True
            if parent not in seen:
                if len(seen) >= C.MAX_FAST_FORWARD_DEPTH:
                    raise MessageRejected(
                        Reason.NOT_FAST_FORWARD,
                        f"ancestry walk exceeded {C.MAX_FAST_FORWARD_DEPTH} commits; use force",
                        limit=C.MAX_FAST_FORWARD_DEPTH,
                    )
                seen.add(parent)
                queue.append(parent)
    return False


def _log(
    ctx: MessageContext, project_id: bytes, name: bytes, old: bytes, new: bytes, nonce: int, **flags: bool
) -> None:
    entry = state_pb2.RefLogEntry(
        project_id=project_id,
        ref_name=name,
        old_hash=old,
        new_hash=new,
        nonce=nonce,
        owner_address=ctx.owner,
        timestamp=ctx.ts,
        message_hash=ctx.message_hash,
        block_number=ctx.block_number,
        **flags,
    )
    ctx.st.store(schema.ref_log_key(project_id, name, ctx.event_id), entry)


def _check_cas(ctx: MessageContext, current: state_pb2.Ref | None, nonce: int, old_hash: bytes) -> None:
    expected = (current.nonce if current else 0) + 1
    if nonce != expected:
        raise MessageRejected(Reason.REF_NONCE_MISMATCH, f"ref nonce must be {expected}", expected=expected, got=nonce)
    if old_hash:
        have = bytes(current.hash) if current else b""
        if old_hash != have:
            raise MessageRejected(
                Reason.REF_HASH_MISMATCH, "ref moved since old_hash", expected=have.hex(), got=old_hash.hex()
            )


def ref_update(ctx: MessageContext, body: pb.RefUpdateBody) -> None:
    project = live_project(ctx, body.project_id)
    require_permission(ctx, project, pb.PERMISSION_WRITE)
    current = ctx.st.ref(project.project_id, body.ref_name)
    _check_cas(ctx, current, body.nonce, body.old_hash)
    if find_commit(ctx.st, project, body.new_hash) is None:
        raise MessageRejected(
            Reason.COMMIT_NOT_FOUND, "new_hash is not a commit of the project", hash=body.new_hash.hex()
        )
    if current is None:
        check_limit("refs per project", project.ref_count, C.MAX_REFS_PER_PROJECT)
        project.ref_count += 1
        ctx.st.put_project(project)
    elif not body.force and not is_ancestor(ctx.st, project, current.hash, body.new_hash):
        raise MessageRejected(
            Reason.NOT_FAST_FORWARD, "new_hash does not descend from the ref's hash", current=current.hash.hex()
        )
    old = bytes(current.hash) if current else b""
    ctx.st.store(
        schema.ref_key(project.project_id, body.ref_name),
        state_pb2.Ref(
            project_id=project.project_id,
            name=body.ref_name,
            hash=body.new_hash,
            nonce=body.nonce,
            updated_at=ctx.ts,
            owner_address=ctx.owner,
        ),
    )
    _log(ctx, project.project_id, body.ref_name, old, body.new_hash, body.nonce, force=body.force)


def ref_delete(ctx: MessageContext, body: pb.RefDeleteBody) -> None:
    project = live_project(ctx, body.project_id)
    require_permission(ctx, project, pb.PERMISSION_WRITE)
    current = ctx.st.ref(project.project_id, body.ref_name)
    if current is None:
        raise MessageRejected(Reason.REF_NOT_FOUND, "no such ref", ref=body.ref_name.hex())
    _check_cas(ctx, current, body.nonce, body.old_hash)
    ctx.st.delete(schema.ref_key(project.project_id, body.ref_name))
    project.ref_count -= 1
    ctx.st.put_project(project)
    _log(ctx, project.project_id, body.ref_name, current.hash, b"", body.nonce, deleted=True)


def commit_bundle(ctx: MessageContext, body: pb.CommitBundleBody) -> None:
    """Index the commits the project lacks (parents first; known ones are skipped), then prune the project
    back to MAX_COMMITS_PER_PROJECT if it went past it (pruning.py: what is protected, what goes)."""
    project = live_project(ctx, body.project_id)
    require_permission(ctx, project, pb.PERMISSION_WRITE)
    in_bundle: set[bytes] = set()
    sequence = last_sequence(ctx.st, project)
    added = 0
    for meta in body.commits:
        for parent in meta.parents:
            if parent not in in_bundle and find_commit(ctx.st, project, parent) is None:
                raise MessageRejected(
                    Reason.COMMIT_NOT_FOUND,
                    "parent is neither committed nor earlier in the bundle",
                    commit=meta.hash.hex(),
                    parent=parent.hex(),
                )
        in_bundle.add(meta.hash)
        if find_commit(ctx.st, project, meta.hash) is not None:
            continue  # already pushed, here or in the project this one was forked from: bundles may overlap
        project.commit_count += 1
        sequence += 1
        added += 1
        commit = state_pb2.Commit(
            project_id=project.project_id,
            hash=meta.hash,
            parents=meta.parents,
            tree_hash=meta.tree_hash,
            title=meta.title,
            author_name=meta.author_name,
            author_timestamp=meta.author_timestamp,
            author_address=meta.author_address or ctx.owner,
            content_digest=meta.content_digest,
            message_hash=ctx.message_hash,
            block_number=ctx.block_number,
            sequence=sequence,
        )
        ctx.st.store(schema.commit_key(project.project_id, meta.hash), commit)
        ctx.st.kv.put(schema.commit_by_sequence_key(project.project_id, sequence), meta.hash)
    if added:
        prune_commits(ctx.st, project, [bytes(meta.hash) for meta in body.commits])
        record_sequence(ctx.st, project, sequence)
        ctx.st.put_project(project)
