"""``chainctl project``, ``mr`` and the social commands (star, follow, like)."""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

from chain.v1 import message_pb2 as pb
from chain.v1 import rpc_pb2, state_pb2
from node import constants as C
from node.cli.common import (
    CliError,
    Context,
    hex0x,
    is_hex_of,
    parse_hex,
    ref_name_bytes,
    show_ref_name,
)
from node.cli.protojson import committed_json, to_json
from node.errors import CliCode
from node.sdk.git import GitError, GitRepo

PERMISSIONS = MappingProxyType({"read": pb.PERMISSION_READ, "write": pb.PERMISSION_WRITE, "admin": pb.PERMISSION_ADMIN})
PROJECT_FIELDS = MappingProxyType(
    {
        "description": pb.PROJECT_FIELD_DESCRIPTION,
        "website": pb.PROJECT_FIELD_WEBSITE,
        "visibility": pb.PROJECT_FIELD_VISIBILITY,
        "default_branch": pb.PROJECT_FIELD_DEFAULT_BRANCH,
        "topics": pb.PROJECT_FIELD_TOPICS,
    }
)


# ---- projects ----


def project_json(p: state_pb2.Project) -> dict[str, Any]:
    return to_json(p)


def project_line(p: state_pb2.Project) -> str:
    vis = pb.ProjectVisibility.Name(p.visibility).removeprefix("PROJECT_VISIBILITY_").lower()
    status = state_pb2.ProjectStatus.Name(p.status).removeprefix("PROJECT_STATUS_").lower()
    return f"{hex0x(bytes(p.project_id))}  {p.name}  ({vis}, {status}, {p.commit_count} commits, {p.ref_count} refs)"


def project_create(ctx: Context, args: Any) -> None:
    b = ctx.account_builder()
    vis = pb.PROJECT_VISIBILITY_PRIVATE if args.private else pb.PROJECT_VISIBILITY_PUBLIC
    msg = b.project_create(args.name, args.description, vis)
    committed = ctx.submit([msg])[0]
    pid = bytes(msg.hash)
    doc = {"project_id": hex0x(pid), "name": args.name, "owner_address": hex0x(b.owner), **committed_json(committed)}
    ctx.emit(doc, [f"created project {args.name}", f"project_id: {hex0x(pid)}"])


def project_list(ctx: Context, args: Any) -> None:
    owner = ctx.address(args.owner) if args.owner else b""
    projects: list[state_pb2.Project] = []
    token = ""
    while True:
        req = rpc_pb2.ListProjectsRequest(owner_address=owner, page_size=args.limit, page_token=token)
        resp = ctx.client.stub.ListProjects(req, timeout=ctx.timeout)
        projects.extend(resp.projects)
        token = resp.next_page_token
        if not token or not args.all:
            break
    ctx.emit(
        {"projects": [project_json(p) for p in projects], "next_page_token": token},
        [project_line(p) for p in projects] or ["no projects"],
    )


def get_project(ctx: Context, pid: bytes) -> state_pb2.Project:
    return ctx.client.stub.GetProject(rpc_pb2.GetProjectRequest(project_id=pid), timeout=ctx.timeout).project


def project_show(ctx: Context, args: Any) -> None:
    ctx.emit(project_json(get_project(ctx, ctx.project_id(args.project))))


def project_fork(ctx: Context, args: Any) -> None:
    source = ctx.project_id(args.source)
    b = ctx.account_builder()
    msg = b.fork(source, args.name)
    committed = ctx.submit([msg])[0]
    doc = {"project_id": hex0x(bytes(msg.hash)), "source_project_id": hex0x(source), **committed_json(committed)}
    ctx.emit(doc, [f"forked {hex0x(source)} as {args.name}", f"project_id: {hex0x(bytes(msg.hash))}"])


def project_archive(ctx: Context, args: Any) -> None:
    pid = ctx.project_id(args.project)
    committed = ctx.submit([ctx.account_builder().project_archive(pid, archived=not args.undo)])[0]
    state = "unarchived" if args.undo else "archived"
    ctx.emit({"project_id": hex0x(pid), "archived": not args.undo, **committed_json(committed)}, f"project {state}")


def project_remove(ctx: Context, args: Any) -> None:
    pid = ctx.project_id(args.project)
    committed = ctx.submit([ctx.account_builder().project_remove(pid)])[0]
    ctx.emit({"project_id": hex0x(pid), "removed": True, **committed_json(committed)}, "project removed")


def project_set(ctx: Context, args: Any) -> None:
    pid = ctx.project_id(args.project)
    value = args.value
    if args.field == "visibility":
        if value.lower() not in ("public", "private"):
            raise CliError(CliCode.INVALID_ARGUMENT, "visibility is public or private")
        value = value.lower()
    committed = ctx.submit([ctx.account_builder().project_metadata(pid, PROJECT_FIELDS[args.field], value)])[0]
    doc = {"project_id": hex0x(pid), "field": args.field, "value": value, **committed_json(committed)}
    ctx.emit(doc, f"{args.field} set")


def project_refs(ctx: Context, args: Any) -> None:
    pid = ctx.project_id(args.project)
    refs: list[state_pb2.Ref] = []
    token = ""
    while True:
        req = rpc_pb2.ListRefsRequest(project_id=pid, page_size=C.MAX_PAGE_SIZE, page_token=token)
        resp = ctx.client.stub.ListRefs(req, timeout=ctx.timeout)
        refs.extend(resp.refs)
        token = resp.next_page_token
        if not token:
            break
    refs.sort(key=lambda r: bytes(r.name))
    docs = [
        {
            "ref": show_ref_name(bytes(r.name)),
            "hash": hex0x(bytes(r.hash)),
            "nonce": r.nonce,
            "updated_at": r.updated_at,
        }
        for r in refs
    ]
    ctx.emit({"project_id": hex0x(pid), "refs": docs}, [f"{d['hash']}  {d['ref']}  (nonce {d['nonce']})" for d in docs])


def collaborator_add(ctx: Context, args: Any) -> None:
    pid = ctx.project_id(args.project)
    who = ctx.address(args.address)
    msg = ctx.account_builder().collaborator_add(pid, who, PERMISSIONS[args.permission])
    committed = ctx.submit([msg])[0]
    doc = {"project_id": hex0x(pid), "address": hex0x(who), "permission": args.permission, **committed_json(committed)}
    ctx.emit(doc, f"{hex0x(who)} is now a collaborator ({args.permission})")


def collaborator_remove(ctx: Context, args: Any) -> None:
    pid = ctx.project_id(args.project)
    who = ctx.address(args.address)
    committed = ctx.submit([ctx.account_builder().collaborator_remove(pid, who)])[0]
    ctx.emit({"project_id": hex0x(pid), "address": hex0x(who), **committed_json(committed)}, "collaborator removed")


def collaborator_list(ctx: Context, args: Any) -> None:
    pid = ctx.project_id(args.project)
    resp = ctx.client.stub.ListCollaborators(rpc_pb2.ListCollaboratorsRequest(project_id=pid), timeout=ctx.timeout)
    docs = [to_json(c) for c in resp.collaborators]
    ctx.emit({"collaborators": docs}, [f"{d['owner_address']}  {d['permission']}" for d in docs] or ["none"])


# ---- social ----


def star(ctx: Context, args: Any) -> None:
    pid = ctx.project_id(args.project)
    committed = ctx.submit([ctx.account_builder().star(pid, remove=args.remove)])[0]
    verb = "unstarred" if args.remove else "starred"
    ctx.emit({"project_id": hex0x(pid), "starred": not args.remove, **committed_json(committed)}, f"{verb}")


def follow(ctx: Context, args: Any) -> None:
    target = ctx.address(args.address)
    committed = ctx.submit([ctx.account_builder().follow(target, remove=args.remove)])[0]
    verb = "unfollowed" if args.remove else "following"
    ctx.emit({"address": hex0x(target), "following": not args.remove, **committed_json(committed)}, verb)


def commit_hash_arg(text: str, repo: str) -> bytes:
    """A 32-byte chain commit hash, or a git revision mapped through ``repo``."""
    if is_hex_of(text, C.HASH_LEN):
        return parse_hex(text, C.HASH_LEN, "commit")
    if not repo:
        raise CliError(
            CliCode.INVALID_ARGUMENT, f"commit {text!r}: give a 0x chain hash, or --repo to map a git revision"
        )
    try:
        git = GitRepo(repo)
        sha = git.resolve(text)
        return git.read_commits([sha])[sha].chain_hash
    except GitError as exc:
        raise CliError(CliCode.GIT_ERROR, str(exc)) from None


def like(ctx: Context, args: Any) -> None:
    pid = ctx.project_id(args.project)
    commit = commit_hash_arg(args.commit, args.repo)
    committed = ctx.submit([ctx.account_builder().like(pid, commit, remove=args.remove)])[0]
    verb = "unliked" if args.remove else "liked"
    doc = {"project_id": hex0x(pid), "commit": hex0x(commit), "liked": not args.remove, **committed_json(committed)}
    ctx.emit(doc, f"{verb} {hex0x(commit)}")


# ---- merge requests ----


def mr_open(ctx: Context, args: Any) -> None:
    target = ctx.project_id(args.target)
    source = ctx.project_id(args.source)
    b = ctx.account_builder()
    body = pb.MergeRequestAddBody(
        target_project_id=target,
        source_project_id=source,
        source_ref=ref_name_bytes(args.source_ref),
        target_ref=ref_name_bytes(args.target_ref),
        title=args.title,
        description=args.description,
    )
    msg = b.build(pb.MESSAGE_TYPE_MERGE_REQUEST_ADD, "merge_request_add", body)
    committed = ctx.submit([msg])[0]
    rid = bytes(msg.hash)
    doc = {"request_id": hex0x(rid), "target_project_id": hex0x(target), **committed_json(committed)}
    ctx.emit(doc, [f"opened merge request {args.title!r}", f"request_id: {hex0x(rid)}"])


def mr_close(ctx: Context, args: Any) -> None:
    target = ctx.project_id(args.target)
    rid = parse_hex(args.request_id, C.HASH_LEN, "request id")
    reason = pb.MERGE_REQUEST_CLOSE_REASON_MERGED if args.merged else pb.MERGE_REQUEST_CLOSE_REASON_CLOSED
    committed = ctx.submit([ctx.account_builder().merge_request_remove(target, rid, reason)])[0]
    state = "merged" if args.merged else "closed"
    doc = {"request_id": hex0x(rid), "state": state, **committed_json(committed)}
    ctx.emit(doc, f"merge request {state}")


def mr_line(m: state_pb2.MergeRequest) -> str:
    src = show_ref_name(bytes(m.source_ref))
    dst = show_ref_name(bytes(m.target_ref))
    return f"{hex0x(bytes(m.request_id))}  {m.title!r}  {src} -> {dst}"


def mr_list(ctx: Context, args: Any) -> None:
    pid = ctx.project_id(args.project)
    items: list[state_pb2.MergeRequest] = []
    token = ""
    while True:
        req = rpc_pb2.ListMergeRequestsRequest(project_id=pid, page_size=C.MAX_PAGE_SIZE, page_token=token)
        resp = ctx.client.stub.ListMergeRequests(req, timeout=ctx.timeout)
        items.extend(resp.merge_requests)
        token = resp.next_page_token
        if not token:
            break
    ctx.emit({"merge_requests": [to_json(m) for m in items]}, [mr_line(m) for m in items] or ["no merge requests"])


def mr_show(ctx: Context, args: Any) -> None:
    pid = ctx.project_id(args.project)
    rid = parse_hex(args.request_id, C.HASH_LEN, "request id")
    req = rpc_pb2.GetMergeRequestRequest(project_id=pid, request_id=rid)
    ctx.emit(to_json(ctx.client.stub.GetMergeRequest(req, timeout=ctx.timeout).merge_request))
