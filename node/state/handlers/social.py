"""Social handlers: follows and stars (links), likes on commits (reactions)."""

from __future__ import annotations

from chain.v1 import message_pb2 as pb
from chain.v1 import state_pb2
from node import constants as C
from node.errors import MessageRejected, Reason
from node.state.authz import live_project, permission
from node.state.context import MessageContext
from node.state.handlers.git import find_commit
from node.state.rules import check_quota, set_add, set_remove
from node.storage import schema


def _link_target(ctx: MessageContext, body: pb.LinkAddBody | pb.LinkRemoveBody) -> tuple[schema.LinkTarget, bytes]:
    if body.type == pb.LINK_TYPE_FOLLOW:
        if body.target_owner_address == ctx.owner:
            raise MessageRejected(Reason.INVALID_FIELD, "an account cannot follow itself", field="target_owner_address")
        return schema.LinkTarget.ACCOUNT, bytes(body.target_owner_address)
    return schema.LinkTarget.PROJECT, bytes(body.target_project_id)


def link_add(ctx: MessageContext, body: pb.LinkAddBody) -> None:
    kind, target = _link_target(ctx, body)
    project = live_project(ctx, target, writable=False) if kind == schema.LinkTarget.PROJECT else None
    if project is not None and permission(ctx, project, ctx.owner) < pb.PERMISSION_READ:
        raise MessageRejected(Reason.PERMISSION_DENIED, "cannot read the project")
    key = schema.link_key(ctx.owner, kind, target)
    existing = ctx.st.load(state_pb2.Link, key)
    account = ctx.st.account_or_new(ctx.owner)
    if existing is None:
        check_quota(ctx.st, ctx.owner, ctx.now, "links", account.link_count, C.UNIT_LINKS)
    if set_add(ctx.st, key, ctx.ts, existing.created_at if existing else None):
        account.link_count += 1
        ctx.st.put_account(account)
        ctx.st.mark(schema.link_by_target_key(kind, target, ctx.owner))
        if project is not None:
            project.star_count += 1
            ctx.st.put_project(project)
    ctx.st.store(
        key,
        state_pb2.Link(
            owner_address=ctx.owner,
            type=body.type,
            target_owner_address=body.target_owner_address,
            target_project_id=body.target_project_id,
            created_at=ctx.ts,
        ),
    )


def link_remove(ctx: MessageContext, body: pb.LinkRemoveBody) -> None:
    kind, target = _link_target(ctx, body)
    key = schema.link_key(ctx.owner, kind, target)
    existing = ctx.st.load(state_pb2.Link, key)
    if not set_remove(ctx.st, key, ctx.ts, existing.created_at if existing else None):
        return
    ctx.st.delete(schema.link_by_target_key(kind, target, ctx.owner))
    account = ctx.st.account_or_new(ctx.owner)
    account.link_count -= 1
    ctx.st.put_account(account)
    if kind == schema.LinkTarget.PROJECT:
        project = ctx.st.project(target)
        if project is not None:
            project.star_count -= 1
            ctx.st.put_project(project)


def reaction_add(ctx: MessageContext, body: pb.ReactionAddBody) -> None:
    project = live_project(ctx, body.project_id, writable=False)
    if permission(ctx, project, ctx.owner) < pb.PERMISSION_READ:
        raise MessageRejected(Reason.PERMISSION_DENIED, "cannot read the project")
    if find_commit(ctx.st, project, body.commit_hash) is None:
        raise MessageRejected(Reason.COMMIT_NOT_FOUND, "no such commit in the project", hash=body.commit_hash.hex())
    key = schema.reaction_key(ctx.owner, body.type, body.project_id, body.commit_hash)
    existing = ctx.st.load(state_pb2.Reaction, key)
    account = ctx.st.account_or_new(ctx.owner)
    if existing is None:
        check_quota(ctx.st, ctx.owner, ctx.now, "reactions", account.reaction_count, C.UNIT_REACTIONS)
    if set_add(ctx.st, key, ctx.ts, existing.created_at if existing else None):
        account.reaction_count += 1
        ctx.st.put_account(account)
        ctx.st.mark(schema.reaction_by_target_key(body.project_id, body.commit_hash, ctx.owner, body.type))
    ctx.st.store(
        key,
        state_pb2.Reaction(
            owner_address=ctx.owner,
            type=body.type,
            project_id=body.project_id,
            commit_hash=body.commit_hash,
            created_at=ctx.ts,
        ),
    )


def reaction_remove(ctx: MessageContext, body: pb.ReactionRemoveBody) -> None:
    key = schema.reaction_key(ctx.owner, body.type, body.project_id, body.commit_hash)
    existing = ctx.st.load(state_pb2.Reaction, key)
    if not set_remove(ctx.st, key, ctx.ts, existing.created_at if existing else None):
        return
    ctx.st.delete(schema.reaction_by_target_key(body.project_id, body.commit_hash, ctx.owner, body.type))
    account = ctx.st.account_or_new(ctx.owner)
    account.reaction_count -= 1
    ctx.st.put_account(account)
