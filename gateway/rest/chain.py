"""Chain routes: blocks, committed messages, proofs and node operations."""

from __future__ import annotations

from aiohttp import web

from chain.v1 import keychain_service_pb2, rpc_pb2
from gateway.errors import invalid_argument
from gateway.readiness import any_ready
from gateway.rest import reads, shapes
from gateway.rest.memo import page_of, record_of, whole
from gateway.rest.params import BLOCK_NUMBER, MESSAGE_HASH, PAGE, STATE_KEY_PARAM, UINT64
from gateway.rest.shapes import HEX_PATTERN, ShapeError, ref
from gateway.rest.table import Body, Call, Param, Route, page_schema

LIST_BLOCKS_BODY = page_of(reads.LIST_BLOCKS, "blocks")


async def list_blocks(c: Call) -> web.Response:
    req = rpc_pb2.ListBlocksRequest(include_chunks=c.inputs.flag("include_chunks"), **c.inputs.page())
    return await c.answer(LIST_BLOCKS_BODY, req)


GET_BLOCK_BODY = record_of(reads.GET_BLOCK, "block")


async def get_block(c: Call) -> web.Response:
    req = rpc_pb2.GetBlockRequest(block_number=c.inputs.integer("number"))
    return await c.answer(GET_BLOCK_BODY, req)


LIST_MESSAGES_BODY = page_of(reads.LIST_MESSAGES, "messages")


async def list_messages(c: Call) -> web.Response:
    req = rpc_pb2.ListMessagesRequest(
        start_block=c.inputs.integer("start_block"), end_block=c.inputs.integer("end_block"), **c.inputs.page()
    )
    return await c.answer(LIST_MESSAGES_BODY, req)


GET_MESSAGE_BODY = record_of(reads.GET_MESSAGE, "message")


async def get_message(c: Call) -> web.Response:
    req = rpc_pb2.GetMessageRequest(hash=c.inputs.hex("hash"))
    return await c.answer(GET_MESSAGE_BODY, req)


GET_OPERATION_PROOF_BODY = whole(reads.GET_OPERATION_PROOF)


async def get_operation_proof(c: Call) -> web.Response:
    req = rpc_pb2.GetOperationProofRequest(key=c.inputs.hex("keyHex"))
    return await c.answer(GET_OPERATION_PROOF_BODY, req)


GET_EXCLUSION_PROOF_BODY = whole(reads.GET_EXCLUSION_PROOF)


async def get_exclusion_proof(c: Call) -> web.Response:
    req = rpc_pb2.GetExclusionProofRequest(key=c.inputs.hex("keyHex"))
    return await c.answer(GET_EXCLUSION_PROOF_BODY, req)


VERIFY_OPERATION_PROOF_BODY = whole(reads.VERIFY_OPERATION_PROOF)


async def verify_operation_proof(c: Call) -> web.Response:
    try:
        req = shapes.from_json(rpc_pb2.VerifyOperationProofRequest.DESCRIPTOR, c.inputs.body)
    except ShapeError as err:
        raise invalid_argument(err.field, str(err), **{"in": "body"}) from None
    return await c.answer(VERIFY_OPERATION_PROOF_BODY, req)


# The node's own state (status, mempool, snapshot, stats): answered by the public port, not by method path.


async def get_node_status(c: Call) -> web.Response:
    resp = await c.read(lambda u, t: u.chain.GetNodeStatus(rpc_pb2.GetNodeStatusRequest(), timeout=t))
    return c.json(shapes.to_json(resp.status))


async def get_webauthn_policy(c: Call) -> web.Response:
    req = keychain_service_pb2.GetWebAuthnPolicyRequest()
    resp = await c.read(lambda u, t: u.keychain.GetWebAuthnPolicy(req, timeout=t))
    return c.json(shapes.to_json(resp))


async def get_health(c: Call) -> web.Response:
    resp = await any_ready(c.nodes)  # ready when SOME node serves (gateway/readiness.py)
    return web.json_response(shapes.to_json(resp), status=200 if resp.ready else 503)


async def get_chain_stats(c: Call) -> web.Response:
    resp = await c.read(lambda u, t: u.chain.GetChainStats(rpc_pb2.GetChainStatsRequest(), timeout=t))
    return c.json(shapes.to_json(resp.stats))


async def get_snapshot_info(c: Call) -> web.Response:
    resp = await c.read(lambda u, t: u.chain.GetSnapshotInfo(rpc_pb2.GetSnapshotInfoRequest(), timeout=t))
    return c.json(shapes.to_json(resp.snapshot))


async def get_mempool_info(c: Call) -> web.Response:
    resp = await c.read(lambda u, t: u.chain.GetMempoolInfo(rpc_pb2.GetMempoolInfoRequest(), timeout=t))
    return c.json(shapes.to_json(resp.mempool))


INCLUDE_CHUNKS = Param(
    "include_chunks", "query", {"type": "boolean"}, "include transaction chunks (messages); headers only otherwise"
)
START_BLOCK = Param("start_block", "query", UINT64, "first block (inclusive); 1 when absent")
END_BLOCK = Param("end_block", "query", UINT64, "last block (inclusive); the current height when absent or 0")
VERIFY_BODY = Body(
    {
        "type": "object",
        "properties": {
            "proof": ref("MerkleProof"),
            "state_root": {
                "type": "string",
                "pattern": HEX_PATTERN,
                "description": "root the proof was obtained against (optional; reports staleness)",
            },
        },
        "required": ["proof"],
        "additionalProperties": False,
    },
    "a proof exactly as `GET /v1/proofs/operation/{keyHex}` returned it, and optionally its `state_root`",
)
HEALTH_503: tuple[str, shapes.Schema] = (
    "no node is ready: a live node's body, or the error body when no node answers",
    {"oneOf": [ref("GetHealthResponse"), ref("Error")]},
)
TAG = "chain"
PROOFS = "proofs"
NODE = "node"

ROUTES: tuple[Route, ...] = (
    Route(
        "GET",
        "/v1/blocks",
        "listBlocks",
        TAG,
        "Committed blocks, newest first (ListBlocks)",
        list_blocks,
        page_schema("blocks", "Block"),
        (INCLUDE_CHUNKS, *PAGE),
    ),
    Route(
        "GET",
        "/v1/blocks/{number}",
        "getBlock",
        TAG,
        "A committed block with its transaction chunks (GetBlock)",
        get_block,
        ref("Block"),
        (BLOCK_NUMBER,),
        errors=(400, 404),
    ),
    Route(
        "GET",
        "/v1/messages",
        "listMessages",
        TAG,
        "Committed messages of a range of blocks, in commit order (ListMessages)",
        list_messages,
        page_schema("messages", "CommittedMessage"),
        (START_BLOCK, END_BLOCK, *PAGE),
    ),
    Route(
        "GET",
        "/v1/messages/{hash}",
        "getMessage",
        TAG,
        "A committed message by BLAKE3 hash (GetMessage)",
        get_message,
        ref("CommittedMessage"),
        (MESSAGE_HASH,),
        errors=(400, 404),
        description="404 until the message is committed; a dropped one is 404 MESSAGE_DROPPED (its reason and height).",
    ),
    Route(
        "GET",
        "/v1/proofs/operation/{keyHex}",
        "getOperationProof",
        PROOFS,
        "Inclusion proof of a public state key (GetOperationProof)",
        get_operation_proof,
        ref("GetOperationProofResponse"),
        (STATE_KEY_PARAM,),
        errors=(400, 404),
    ),
    Route(
        "GET",
        "/v1/proofs/exclusion/{keyHex}",
        "getExclusionProof",
        PROOFS,
        "Exclusion proof of an absent public state key (GetExclusionProof)",
        get_exclusion_proof,
        ref("GetExclusionProofResponse"),
        (STATE_KEY_PARAM,),
    ),
    Route(
        "POST",
        "/v1/proofs/verify",
        "verifyOperationProof",
        PROOFS,
        "Verify an operation proof against the current committed root (VerifyOperationProof)",
        verify_operation_proof,
        ref("VerifyOperationProofResponse"),
        body=VERIFY_BODY,
        errors=(400, 415),
    ),
    Route(
        "GET",
        "/v1/node/status",
        "getNodeStatus",
        NODE,
        "Block height, mempool size, pending blocks, network, version, uptime (GetNodeStatus)",
        get_node_status,
        ref("NodeStatus"),
        errors=(),
    ),
    Route(
        "GET",
        "/v1/network/webauthn",
        "getWebAuthnPolicy",
        NODE,
        "The passkey relying party of this network: rp_id and allowed origins (GetWebAuthnPolicy)",
        get_webauthn_policy,
        ref("GetWebAuthnPolicyResponse"),
        errors=(),
        description="`allowed_origins` empty (`origins_derived` true): origins follow from rp_id (docs/crypto.md).",
    ),
    Route(
        "GET",
        "/v1/health",
        "getHealth",
        NODE,
        "Readiness of the gateway: each node it knows is asked (GetHealth); 200 when some node is ready, 503 when none",
        get_health,
        ref("GetHealthResponse"),
        errors=(),
        extra_responses={503: HEALTH_503},
    ),
    Route(
        "GET",
        "/v1/stats",
        "getChainStats",
        NODE,
        "Cumulative totals of messages, projects, accounts, blocks (GetChainStats)",
        get_chain_stats,
        ref("ChainStats"),
        errors=(),
    ),
    Route(
        "GET",
        "/v1/snapshot",
        "getSnapshotInfo",
        NODE,
        "The newest snapshot: block number, entry count, state root (GetSnapshotInfo); 404 before the first",
        get_snapshot_info,
        ref("SnapshotInfo"),
        errors=(404,),
    ),
    Route(
        "GET",
        "/v1/mempool",
        "getMempoolInfo",
        NODE,
        "Mempool size and per-type message counts (GetMempoolInfo)",
        get_mempool_info,
        ref("MempoolInfo"),
        errors=(),
    ),
)
