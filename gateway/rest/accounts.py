"""Account routes: `/v1/accounts/{ownerAddress}/…` (summary, custody keys, delegated keys, activity,
verifications, links, reactions, merge requests opened, projects by name, storage proof)."""

from __future__ import annotations

from types import MappingProxyType

from aiohttp import web

from chain.v1 import message_pb2 as pb
from chain.v1 import rpc_pb2
from gateway.rest import reads, shapes
from gateway.rest.memo import Shaped, page_of, record_of
from gateway.rest.params import (
    DELEGATED_KEY,
    KEY_ID,
    OWNER,
    PAGE,
    PROJECT_NAME_PARAM,
)
from gateway.rest.shapes import ref
from gateway.rest.table import Call, Param, Route, page_schema

GET_ACCOUNT_BODY = Shaped(reads.GET_ACCOUNT, shapes.account_summary)


async def get_account(c: Call) -> web.Response:
    return await c.answer(GET_ACCOUNT_BODY, rpc_pb2.GetAccountRequest(owner_address=c.inputs.hex("ownerAddress")))


LIST_CUSTODY_KEYS_BODY = page_of(reads.LIST_CUSTODY_KEYS, "custody_keys")


async def list_custody_keys(c: Call) -> web.Response:
    req = rpc_pb2.ListCustodyKeysRequest(owner_address=c.inputs.hex("ownerAddress"), **c.inputs.page())
    return await c.answer(LIST_CUSTODY_KEYS_BODY, req)


GET_CUSTODY_KEY_BODY = record_of(reads.GET_CUSTODY_KEY, "custody_key")


async def get_custody_key(c: Call) -> web.Response:
    req = rpc_pb2.GetCustodyKeyRequest(owner_address=c.inputs.hex("ownerAddress"), key_id=c.inputs.hex("key_id"))
    return await c.answer(GET_CUSTODY_KEY_BODY, req)


LIST_MERGE_REQUESTS_BY_REQUESTER_BODY = page_of(reads.LIST_MERGE_REQUESTS_BY_REQUESTER, "merge_requests")


async def list_merge_requests_by_requester(c: Call) -> web.Response:
    req = rpc_pb2.ListMergeRequestsByRequesterRequest(owner_address=c.inputs.hex("ownerAddress"), **c.inputs.page())
    return await c.answer(LIST_MERGE_REQUESTS_BY_REQUESTER_BODY, req)


GET_ACCOUNT_ACTIVITY_BODY = page_of(reads.GET_ACCOUNT_ACTIVITY, "messages")


async def get_account_activity(c: Call) -> web.Response:
    req = rpc_pb2.GetAccountActivityRequest(owner_address=c.inputs.hex("ownerAddress"), **c.inputs.page())
    return await c.answer(GET_ACCOUNT_ACTIVITY_BODY, req)


LIST_KEYS_BODY = page_of(reads.LIST_KEYS, "keys")


async def list_keys(c: Call) -> web.Response:
    req = rpc_pb2.ListKeysRequest(owner_address=c.inputs.hex("ownerAddress"), **c.inputs.page())
    return await c.answer(LIST_KEYS_BODY, req)


GET_KEY_BODY = record_of(reads.GET_KEY, "key")


async def get_key(c: Call) -> web.Response:
    req = rpc_pb2.GetKeyRequest(owner_address=c.inputs.hex("ownerAddress"), key=c.inputs.hex("key"))
    return await c.answer(GET_KEY_BODY, req)


LIST_VERIFICATIONS_BODY = page_of(reads.LIST_VERIFICATIONS, "verifications")


async def list_verifications(c: Call) -> web.Response:
    req = rpc_pb2.ListVerificationsRequest(owner_address=c.inputs.hex("ownerAddress"), **c.inputs.page())
    return await c.answer(LIST_VERIFICATIONS_BODY, req)


LINK_TYPES = MappingProxyType({"follow": pb.LINK_TYPE_FOLLOW, "star": pb.LINK_TYPE_STAR})


LIST_LINKS_BODY = page_of(reads.LIST_LINKS, "links")


async def list_links(c: Call) -> web.Response:
    link_type = LINK_TYPES.get(c.inputs.text("type"), pb.LINK_TYPE_UNSPECIFIED)
    req = rpc_pb2.ListLinksRequest(owner_address=c.inputs.hex("ownerAddress"), type=link_type, **c.inputs.page())
    return await c.answer(LIST_LINKS_BODY, req)


LIST_REACTIONS_BODY = page_of(reads.LIST_REACTIONS, "reactions")


async def list_reactions(c: Call) -> web.Response:
    req = rpc_pb2.ListReactionsRequest(owner_address=c.inputs.hex("ownerAddress"), **c.inputs.page())
    return await c.answer(LIST_REACTIONS_BODY, req)


GET_PROJECT_BY_NAME_BODY = record_of(reads.GET_PROJECT_BY_NAME, "project")


async def get_project_by_name(c: Call) -> web.Response:
    req = rpc_pb2.GetProjectByNameRequest(owner_address=c.inputs.hex("ownerAddress"), name=c.inputs.text("name"))
    return await c.answer(GET_PROJECT_BY_NAME_BODY, req)


GET_STORAGE_QUOTA_PROOF_BODY = record_of(reads.GET_STORAGE_QUOTA_PROOF, "proof")


async def get_storage_quota_proof(c: Call) -> web.Response:
    req = rpc_pb2.GetStorageQuotaProofRequest(owner_address=c.inputs.hex("ownerAddress"))
    return await c.answer(GET_STORAGE_QUOTA_PROOF_BODY, req)


LINK_TYPE = Param(
    "type", "query", {"type": "string", "enum": sorted(LINK_TYPES)}, "only follows or only stars; both when absent"
)
A = "/v1/accounts/{ownerAddress}"
TAG = "accounts"

ROUTES: tuple[Route, ...] = (
    Route(
        "GET",
        A,
        "getAccount",
        TAG,
        "Account summary (GetAccount), with the custody_keys snapshot and custody_nonce",
        get_account,
        ref("AccountSummary"),
        (OWNER,),
        description="Any 20-byte address is an account: an unknown one reads as zero counters.",
    ),
    Route(
        "GET",
        A + "/custody-keys",
        "listCustodyKeys",
        TAG,
        "Custody keys of the account keychain, paginated",
        list_custody_keys,
        page_schema("custody_keys", "CustodyKey"),
        (OWNER, *PAGE),
    ),
    Route(
        "GET",
        A + "/custody-keys/{key_id}",
        "getCustodyKey",
        TAG,
        "One custody key entry; 404 when the account has no such key",
        get_custody_key,
        ref("CustodyKey"),
        (OWNER, KEY_ID),
        errors=(400, 404),
    ),
    Route(
        "GET",
        A + "/merge-requests",
        "listMergeRequestsByRequester",
        TAG,
        "Active merge requests opened by the account (ListMergeRequestsByRequester)",
        list_merge_requests_by_requester,
        page_schema("merge_requests", "MergeRequest"),
        (OWNER, *PAGE),
    ),
    Route(
        "GET",
        A + "/activity",
        "getAccountActivity",
        TAG,
        "Recent committed messages of the account, newest first (GetAccountActivity)",
        get_account_activity,
        page_schema("messages", "CommittedMessage"),
        (OWNER, *PAGE),
    ),
    Route(
        "GET",
        A + "/keys",
        "listKeys",
        TAG,
        "Delegated (Ed25519) keys of the account (ListKeys)",
        list_keys,
        page_schema("keys", "KeyEntry"),
        (OWNER, *PAGE),
    ),
    Route(
        "GET",
        A + "/keys/{key}",
        "getKey",
        TAG,
        "One delegated key: scope, allowed projects, added_at (GetKey)",
        get_key,
        ref("KeyEntry"),
        (OWNER, DELEGATED_KEY),
        errors=(400, 404),
    ),
    Route(
        "GET",
        A + "/verifications",
        "listVerifications",
        TAG,
        "Verified external addresses of the account (ListVerifications)",
        list_verifications,
        page_schema("verifications", "Verification"),
        (OWNER, *PAGE),
    ),
    Route(
        "GET",
        A + "/links",
        "listLinks",
        TAG,
        "Follows and stars made by the account (ListLinks)",
        list_links,
        page_schema("links", "Link"),
        (OWNER, LINK_TYPE, *PAGE),
    ),
    Route(
        "GET",
        A + "/reactions",
        "listReactions",
        TAG,
        "Likes on commits made by the account (ListReactions)",
        list_reactions,
        page_schema("reactions", "Reaction"),
        (OWNER, *PAGE),
    ),
    Route(
        "GET",
        A + "/projects/{name}",
        "getProjectByName",
        TAG,
        "A project by owner_address and name (GetProjectByName)",
        get_project_by_name,
        ref("Project"),
        (OWNER, PROJECT_NAME_PARAM),
        errors=(400, 404),
    ),
    Route(
        "GET",
        A + "/storage-proof",
        "getStorageQuotaProof",
        TAG,
        "Proof bundle of the account's active storage grants (GetStorageQuotaProof)",
        get_storage_quota_proof,
        ref("StorageQuotaProof"),
        (OWNER,),
    ),
)
