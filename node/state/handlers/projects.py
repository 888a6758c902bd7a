"""Project handlers: create, metadata, archive, remove, fork, collaborators, merge requests."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

from chain.v1 import message_pb2 as pb
from chain.v1 import state_pb2
from node import constants as C
from node.errors import MessageRejected, Reason
from node.state.authz import live_project, permission, require_permission
from node.state.context import MessageContext
from node.state.rules import check_limit, check_quota, lww_write, set_add, set_remove
from node.storage import schema

PROJECT_FIELDS: Final[Mapping[int, str]] = MappingProxyType(
    {
        pb.PROJECT_FIELD_DESCRIPTION: "description",
        pb.PROJECT_FIELD_WEBSITE: "website",
        pb.PROJECT_FIELD_DEFAULT_BRANCH: "default_branch",
        pb.PROJECT_FIELD_TOPICS: "topics",
    }
)


def _new_project(ctx: MessageContext, name: str) -> state_pb2.Project:
    """Quota, name uniqueness and indexes shared by PROJECT_CREATE and FORK."""
    account = ctx.st.account_or_new(ctx.owner)
    check_quota(ctx.st, ctx.owner, ctx.now, "projects", account.project_count, C.UNIT_PROJECTS)
    if ctx.st.project_id_by_name(ctx.owner, name) is not None:
        raise MessageRejected(Reason.NAME_TAKEN, f"the account already has a project named {name!r}", name=name)
    project = state_pb2.Project(
        project_id=ctx.message_hash,
        owner_address=ctx.owner,
        name=name,
        visibility=pb.PROJECT_VISIBILITY_PUBLIC,
        status=state_pb2.PROJECT_STATUS_ACTIVE,
        created_at=ctx.ts,
        created_block=ctx.block_number,
    )
    ctx.st.kv.put(schema.project_name_key(ctx.owner, name), project.project_id)
    ctx.st.mark(schema.project_by_owner_key(ctx.owner, project.project_id))
    ctx.st.mark(schema.project_by_name_key(name, project.project_id))
    ctx.st.mark(schema.live_project_key(project.project_id))
    account.project_count += 1
    ctx.st.put_account(account)
    return project


def project_create(ctx: MessageContext, body: pb.ProjectCreateBody) -> None:
    project = _new_project(ctx, body.name)
    project.description = body.description
    if body.visibility:
        project.visibility = body.visibility
    for field in (pb.PROJECT_FIELD_DESCRIPTION, pb.PROJECT_FIELD_VISIBILITY):  # creation is the first write
        ctx.st.set_stamp(schema.lww_stamp_key(schema.LwwEntity.PROJECT, project.project_id, field), ctx.ts)
    ctx.st.put_project(project)


def fork(ctx: MessageContext, body: pb.ForkBody) -> None:
    source = live_project(ctx, body.source_project_id, writable=False)
    if permission(ctx, source, ctx.owner) < pb.PERMISSION_READ:
        raise MessageRejected(Reason.PERMISSION_DENIED, "cannot read the source project")
    project = _new_project(ctx, body.name)
    project.forked_from = source.project_id
    project.description = source.description
    project.visibility = source.visibility
    project.default_branch = source.default_branch
    for _, ref in ctx.st.scan(state_pb2.Ref, schema.refs_prefix(source.project_id)):
        copied = state_pb2.Ref(
            project_id=project.project_id,
            name=ref.name,
            hash=ref.hash,
            nonce=1,
            updated_at=ctx.ts,
            owner_address=ctx.owner,
        )
        ctx.st.store(schema.ref_key(project.project_id, ref.name), copied)
        project.ref_count += 1
    ctx.st.put_project(project)


def project_metadata(ctx: MessageContext, body: pb.ProjectMetadataBody) -> None:
    project = live_project(ctx, body.project_id)
    needed = pb.PERMISSION_ADMIN if body.field == pb.PROJECT_FIELD_VISIBILITY else pb.PERMISSION_WRITE
    require_permission(ctx, project, needed)
    lww_write(ctx.st, schema.lww_stamp_key(schema.LwwEntity.PROJECT, project.project_id, body.field), ctx.ts)
    if body.field == pb.PROJECT_FIELD_VISIBILITY:
        project.visibility = {"public": pb.PROJECT_VISIBILITY_PUBLIC, "private": pb.PROJECT_VISIBILITY_PRIVATE}[
            body.value
        ]
    else:
        setattr(project, PROJECT_FIELDS[body.field], body.value)
    ctx.st.put_project(project)


def project_archive(ctx: MessageContext, body: pb.ProjectArchiveBody) -> None:
    project = live_project(ctx, body.project_id, writable=False)
    require_permission(ctx, project, pb.PERMISSION_ADMIN)
    archived = project.status == state_pb2.PROJECT_STATUS_ARCHIVED
    if archived == body.archived:
        raise MessageRejected(
            Reason.ALREADY_EXISTS if archived else Reason.NOT_PRESENT,
            "project is already " + ("archived" if archived else "active"),
        )
    project.status = state_pb2.PROJECT_STATUS_ARCHIVED if body.archived else state_pb2.PROJECT_STATUS_ACTIVE
    ctx.st.put_project(project)


def project_remove(ctx: MessageContext, body: pb.ProjectRemoveBody) -> None:
    project = live_project(ctx, body.project_id, writable=False)
    require_permission(ctx, project, pb.PERMISSION_OWNER)
    project.status = state_pb2.PROJECT_STATUS_REMOVED
    ctx.st.put_project(project)
    ctx.st.delete(schema.project_name_key(project.owner_address, project.name))
    ctx.st.delete(schema.project_by_owner_key(project.owner_address, project.project_id))
    ctx.st.delete(schema.project_by_name_key(project.name, project.project_id))
    ctx.st.delete(schema.live_project_key(project.project_id))
    account = ctx.st.account_or_new(project.owner_address)
    account.project_count -= 1
    ctx.st.put_account(account)


# ---- collaborators ----
def collaborator_add(ctx: MessageContext, body: pb.CollaboratorAddBody) -> None:
    project = live_project(ctx, body.project_id)
    have = require_permission(ctx, project, pb.PERMISSION_ADMIN)
    address = bytes(body.collaborator_address)
    if address == project.owner_address:
        raise MessageRejected(Reason.INVALID_FIELD, "the owner is not a collaborator", field="collaborator_address")
    if body.permission == pb.PERMISSION_ADMIN and have < pb.PERMISSION_OWNER:
        raise MessageRejected(Reason.PERMISSION_DENIED, "only the owner grants ADMIN")
    key = schema.collaborator_key(project.project_id, address)
    existing = ctx.st.collaborator(project.project_id, address)
    if existing is not None and existing.permission == pb.PERMISSION_ADMIN and have < pb.PERMISSION_OWNER:
        raise MessageRejected(Reason.PERMISSION_DENIED, "only the owner changes an ADMIN")
    if existing is None:
        check_quota(
            ctx.st, project.owner_address, ctx.now, "collaborators", project.collaborator_count, C.UNIT_COLLABORATORS
        )
    if set_add(ctx.st, key, ctx.ts, existing.added_at if existing else None):
        project.collaborator_count += 1
        ctx.st.put_project(project)
    ctx.st.store(
        key,
        state_pb2.Collaborator(
            project_id=project.project_id,
            owner_address=address,
            permission=body.permission,
            added_at=ctx.ts,
            added_by=ctx.owner,
        ),
    )


def collaborator_remove(ctx: MessageContext, body: pb.CollaboratorRemoveBody) -> None:
    project = live_project(ctx, body.project_id)
    address = bytes(body.collaborator_address)
    existing = ctx.st.collaborator(project.project_id, address)
    if address != ctx.owner:  # leaving a project needs no permission
        have = require_permission(ctx, project, pb.PERMISSION_ADMIN)
        if existing is not None and existing.permission == pb.PERMISSION_ADMIN and have < pb.PERMISSION_OWNER:
            raise MessageRejected(Reason.PERMISSION_DENIED, "only the owner removes an ADMIN")
    key = schema.collaborator_key(project.project_id, address)
    if set_remove(ctx.st, key, ctx.ts, existing.added_at if existing else None):
        project.collaborator_count -= 1
        ctx.st.put_project(project)


# ---- merge requests ----
def merge_request_add(ctx: MessageContext, body: pb.MergeRequestAddBody) -> None:
    target = live_project(ctx, body.target_project_id)
    source = live_project(ctx, body.source_project_id, writable=False)
    for project in (target, source):
        if permission(ctx, project, ctx.owner) < pb.PERMISSION_READ:
            raise MessageRejected(Reason.PERMISSION_DENIED, "cannot read the project", project=project.project_id.hex())
    request = state_pb2.MergeRequest(
        request_id=ctx.message_hash,
        target_project_id=target.project_id,
        source_project_id=source.project_id,
        source_ref=body.source_ref,
        target_ref=body.target_ref,
        requester_owner_address=ctx.owner,
        title=body.title,
        description=body.description,
        status=state_pb2.MERGE_REQUEST_STATUS_OPEN,
        created_at=ctx.ts,
    )
    ctx.st.store(schema.merge_request_key(target.project_id, request.request_id), request)
    ctx.st.kv.put(schema.merge_request_by_requester_key(ctx.owner, request.request_id), target.project_id)
    target.open_merge_request_count += 1
    ctx.st.put_project(target)


def merge_request_remove(ctx: MessageContext, body: pb.MergeRequestRemoveBody) -> None:
    target = live_project(ctx, body.target_project_id, writable=False)
    request = ctx.st.merge_request(target.project_id, body.request_id)
    if request is None:
        raise MessageRejected(Reason.MERGE_REQUEST_NOT_FOUND, "no open merge request", request_id=body.request_id.hex())
    merged = body.reason == pb.MERGE_REQUEST_CLOSE_REASON_MERGED
    if merged or ctx.owner != request.requester_owner_address:
        require_permission(ctx, target, pb.PERMISSION_WRITE)
    if ctx.ts < request.created_at:
        raise MessageRejected(Reason.STALE_UPDATE, "opened after this close", added_at=request.created_at, got=ctx.ts)
    ctx.st.delete(schema.merge_request_key(target.project_id, request.request_id))
    ctx.st.delete(schema.merge_request_by_requester_key(request.requester_owner_address, request.request_id))
    target.open_merge_request_count -= 1
    ctx.st.put_project(target)


__all__ = ("check_limit",)
