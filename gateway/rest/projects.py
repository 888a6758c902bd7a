"""Project and git-object routes: `/v1/projects…` (projects, activity, merge requests, refs, ref log,
commits, ancestors, reactions on a commit, collaborators) and `/v1/links/by-target`."""

from __future__ import annotations

from typing import TypeVar

from aiohttp import web
from google.protobuf.message import Message

from chain.v1 import rpc_pb2
from gateway.rest import reads
from gateway.rest.memo import Shaped, page_of, record_of
from gateway.rest.params import ADDRESS, COMMIT, HASH32, PAGE, PROJECT, PROJECT_NAME, REF, REQUEST_ID
from gateway.rest.shapes import ref
from gateway.rest.table import Call, Param, Route, page_schema

M = TypeVar("M", bound=Message)


async def project_page(c: Call, shaped: Shaped[M], request: Message) -> web.Response:
    """A page of a project's listing. An empty page may mean that there is no such project: GetProject then
    answers (404 `NOT_FOUND`, as `/activity` does). The node's list RPCs answer a missing project with an
    empty list (gRPC unchanged)."""
    response = await c.answer(shaped, request)
    if response.body == shaped.empty:
        await c.fetch(reads.GET_PROJECT, rpc_pb2.GetProjectRequest(project_id=c.inputs.hex("projectId")))
    return response


LIST_PROJECTS_BODY = page_of(reads.LIST_PROJECTS, "projects")


async def list_projects(c: Call) -> web.Response:
    owner = c.inputs.hex("owner_address") if c.inputs.get("owner_address") else b""
    req = rpc_pb2.ListProjectsRequest(owner_address=owner, **c.inputs.page())
    return await c.answer(LIST_PROJECTS_BODY, req)


SEARCH_PROJECTS_BODY = page_of(reads.SEARCH_PROJECTS, "projects")


async def search_projects(c: Call) -> web.Response:
    req = rpc_pb2.SearchProjectsRequest(name_prefix=c.inputs.text("prefix"), **c.inputs.page())
    return await c.answer(SEARCH_PROJECTS_BODY, req)


GET_PROJECT_BODY = record_of(reads.GET_PROJECT, "project")


async def get_project(c: Call) -> web.Response:
    req = rpc_pb2.GetProjectRequest(project_id=c.inputs.hex("projectId"))
    return await c.answer(GET_PROJECT_BODY, req)


GET_PROJECT_ACTIVITY_BODY = page_of(reads.GET_PROJECT_ACTIVITY, "messages")


async def get_project_activity(c: Call) -> web.Response:
    req = rpc_pb2.GetProjectActivityRequest(project_id=c.inputs.hex("projectId"), **c.inputs.page())
    return await c.answer(GET_PROJECT_ACTIVITY_BODY, req)


LIST_MERGE_REQUESTS_BODY = page_of(reads.LIST_MERGE_REQUESTS, "merge_requests")


async def list_merge_requests(c: Call) -> web.Response:
    req = rpc_pb2.ListMergeRequestsRequest(project_id=c.inputs.hex("projectId"), **c.inputs.page())
    return await project_page(c, LIST_MERGE_REQUESTS_BODY, req)


GET_MERGE_REQUEST_BODY = record_of(reads.GET_MERGE_REQUEST, "merge_request")


async def get_merge_request(c: Call) -> web.Response:
    req = rpc_pb2.GetMergeRequestRequest(project_id=c.inputs.hex("projectId"), request_id=c.inputs.hex("requestId"))
    return await c.answer(GET_MERGE_REQUEST_BODY, req)


LIST_REFS_BODY = page_of(reads.LIST_REFS, "refs")


async def list_refs(c: Call) -> web.Response:
    req = rpc_pb2.ListRefsRequest(project_id=c.inputs.hex("projectId"), **c.inputs.page())
    return await project_page(c, LIST_REFS_BODY, req)


GET_REF_BODY = record_of(reads.GET_REF, "ref")


async def get_ref(c: Call) -> web.Response:
    req = rpc_pb2.GetRefRequest(project_id=c.inputs.hex("projectId"), ref_name=c.inputs.hex("refHex"))
    return await c.answer(GET_REF_BODY, req)


GET_REF_LOG_BODY = page_of(reads.GET_REF_LOG, "entries")


async def get_ref_log(c: Call) -> web.Response:
    req = rpc_pb2.GetRefLogRequest(
        project_id=c.inputs.hex("projectId"), ref_name=c.inputs.hex("refHex"), **c.inputs.page()
    )
    return await project_page(c, GET_REF_LOG_BODY, req)


LIST_COMMITS_BODY = page_of(reads.LIST_COMMITS, "commits")


async def list_commits(c: Call) -> web.Response:
    req = rpc_pb2.ListCommitsRequest(project_id=c.inputs.hex("projectId"), **c.inputs.page())
    return await project_page(c, LIST_COMMITS_BODY, req)


GET_COMMIT_BODY = record_of(reads.GET_COMMIT, "commit")


async def get_commit(c: Call) -> web.Response:
    req = rpc_pb2.GetCommitRequest(project_id=c.inputs.hex("projectId"), commit_hash=c.inputs.hex("hash"))
    return await c.answer(GET_COMMIT_BODY, req)


GET_COMMIT_ANCESTORS_BODY = page_of(reads.GET_COMMIT_ANCESTORS, "commits")


async def get_commit_ancestors(c: Call) -> web.Response:
    req = rpc_pb2.GetCommitAncestorsRequest(
        project_id=c.inputs.hex("projectId"),
        commit_hash=c.inputs.hex("hash"),
        first_parent=c.inputs.flag("first_parent"),
        **c.inputs.page(),
    )
    return await c.answer(GET_COMMIT_ANCESTORS_BODY, req)


LIST_REACTIONS_BY_TARGET_BODY = page_of(reads.LIST_REACTIONS_BY_TARGET, "reactions")


async def list_reactions_by_target(c: Call) -> web.Response:
    req = rpc_pb2.ListReactionsByTargetRequest(
        project_id=c.inputs.hex("projectId"), commit_hash=c.inputs.hex("hash"), **c.inputs.page()
    )
    return await project_page(c, LIST_REACTIONS_BY_TARGET_BODY, req)


LIST_COLLABORATORS_BODY = page_of(reads.LIST_COLLABORATORS, "collaborators")


async def list_collaborators(c: Call) -> web.Response:
    req = rpc_pb2.ListCollaboratorsRequest(project_id=c.inputs.hex("projectId"), **c.inputs.page())
    return await project_page(c, LIST_COLLABORATORS_BODY, req)


LIST_LINKS_BY_TARGET_BODY = page_of(reads.LIST_LINKS_BY_TARGET, "links")


async def list_links_by_target(c: Call) -> web.Response:
    owner = c.inputs.hex("target_owner_address") if c.inputs.get("target_owner_address") else b""
    project = c.inputs.hex("target_project_id") if c.inputs.get("target_project_id") else b""
    req = rpc_pb2.ListLinksByTargetRequest(target_owner_address=owner, target_project_id=project, **c.inputs.page())
    return await c.answer(LIST_LINKS_BY_TARGET_BODY, req)


OWNER_FILTER = Param("owner_address", "query", ADDRESS, "only projects of this owner_address")
PREFIX = Param("prefix", "query", PROJECT_NAME, "project name prefix (case-insensitive)", required=True)
FIRST_PARENT = Param("first_parent", "query", {"type": "boolean"}, "follow first parents only")
TARGET_OWNER = Param(
    "target_owner_address", "query", ADDRESS, "accounts following this owner_address (give this or target_project_id)"
)
TARGET_PROJECT = Param(
    "target_project_id", "query", HASH32, "accounts starring this project (give this or target_owner_address)"
)
P = "/v1/projects/{projectId}"
TAG = "projects"
GIT = "git"

ROUTES: tuple[Route, ...] = (
    Route(
        "GET",
        "/v1/projects",
        "listProjects",
        TAG,
        "Projects, optionally only those of one owner_address (ListProjects)",
        list_projects,
        page_schema("projects", "Project"),
        (OWNER_FILTER, *PAGE),
    ),
    Route(
        "GET",
        "/v1/projects/search",
        "searchProjects",
        TAG,
        "Projects whose name starts with a prefix (SearchProjects)",
        search_projects,
        page_schema("projects", "Project"),
        (PREFIX, *PAGE),
    ),
    Route(
        "GET",
        P,
        "getProject",
        TAG,
        "Project metadata and status (GetProject)",
        get_project,
        ref("Project"),
        (PROJECT,),
        errors=(400, 404),
    ),
    Route(
        "GET",
        P + "/activity",
        "getProjectActivity",
        TAG,
        "Recent committed messages of the project, newest first (GetProjectActivity)",
        get_project_activity,
        page_schema("messages", "CommittedMessage"),
        (PROJECT, *PAGE),
        errors=(400, 404),
    ),
    Route(
        "GET",
        P + "/merge-requests",
        "listMergeRequests",
        TAG,
        "Active merge requests targeting the project (ListMergeRequests)",
        list_merge_requests,
        page_schema("merge_requests", "MergeRequest"),
        (PROJECT, *PAGE),
        errors=(400, 404),
    ),
    Route(
        "GET",
        P + "/merge-requests/{requestId}",
        "getMergeRequest",
        TAG,
        "One active merge request (GetMergeRequest)",
        get_merge_request,
        ref("MergeRequest"),
        (PROJECT, REQUEST_ID),
        errors=(400, 404),
    ),
    Route(
        "GET",
        P + "/refs",
        "listRefs",
        GIT,
        "Refs of the project in name order (ListRefs)",
        list_refs,
        page_schema("refs", "Ref"),
        (PROJECT, *PAGE),
        errors=(400, 404),
    ),
    Route(
        "GET",
        P + "/refs/{refHex}",
        "getRef",
        GIT,
        "One ref by hex-encoded name (GetRef)",
        get_ref,
        ref("Ref"),
        (PROJECT, REF),
        errors=(400, 404),
    ),
    Route(
        "GET",
        P + "/refs/{refHex}/log",
        "getRefLog",
        GIT,
        "Update history of a ref, newest first (GetRefLog)",
        get_ref_log,
        page_schema("entries", "RefLogEntry"),
        (PROJECT, REF, *PAGE),
        errors=(400, 404),
    ),
    Route(
        "GET",
        P + "/commits",
        "listCommits",
        GIT,
        "Commits of the project, newest first (ListCommits)",
        list_commits,
        page_schema("commits", "Commit"),
        (PROJECT, *PAGE),
        errors=(400, 404),
    ),
    Route(
        "GET",
        P + "/commits/{hash}",
        "getCommit",
        GIT,
        "Commit metadata (GetCommit); commits of a fork's source are found too",
        get_commit,
        ref("Commit"),
        (PROJECT, COMMIT),
        errors=(400, 404),
    ),
    Route(
        "GET",
        P + "/commits/{hash}/ancestors",
        "getCommitAncestors",
        GIT,
        "Ancestors of a commit, breadth first, the commit excluded (GetCommitAncestors)",
        get_commit_ancestors,
        page_schema("commits", "Commit"),
        (PROJECT, COMMIT, FIRST_PARENT, *PAGE),
        errors=(400, 404),
    ),
    Route(
        "GET",
        P + "/commits/{hash}/reactions",
        "listReactionsByTarget",
        GIT,
        "Reactions (likes) on a commit (ListReactionsByTarget)",
        list_reactions_by_target,
        page_schema("reactions", "Reaction"),
        (PROJECT, COMMIT, *PAGE),
        errors=(400, 404),
    ),
    Route(
        "GET",
        P + "/collaborators",
        "listCollaborators",
        TAG,
        "Collaborators of the project (ListCollaborators)",
        list_collaborators,
        page_schema("collaborators", "Collaborator"),
        (PROJECT, *PAGE),
        errors=(400, 404),
    ),
    Route(
        "GET",
        "/v1/links/by-target",
        "listLinksByTarget",
        "accounts",
        "Links to a target account (target_owner_address) or project (target_project_id) (ListLinksByTarget)",
        list_links_by_target,
        page_schema("links", "Link"),
        (TARGET_OWNER, TARGET_PROJECT, *PAGE),
        description="Give exactly one of `target_owner_address` and `target_project_id` (400 otherwise).",
        exactly_one_of=("target_owner_address", "target_project_id"),
    ),
)
