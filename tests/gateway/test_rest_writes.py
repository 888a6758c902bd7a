"""The write routes and every error path, on the gateway app in-process (aiohttp test server, 127.0.0.1)
in front of a real node: JSON and binary protobuf bodies, dry-run, per-message batch results, input
validation naming the field, node reason codes mapped to HTTP status, and the HTTP errors' JSON body."""

from __future__ import annotations

import asyncio
import base64
import time
from typing import Any

import grpc
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient
from google.protobuf import json_format
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from chain.v1 import message_pb2 as pb
from chain.v1 import rpc_pb2
from gateway.errors import ApiError, error_middleware, grpc_error, with_0x
from gateway.rest.writes import hex_bytes
from node.sdk.keys import Secp256k1Key
from node.sdk.messages import sign_message
from tests.fixtures.actors import RemoteActor, new_account
from tests.fixtures.nodeproc import NodeProcess
from tests.gateway.conftest import MakeClient

Client = TestClient[Any, Any]
PROTOBUF = {"Content-Type": "application/x-protobuf"}


def as_json(msg: pb.Message) -> dict[str, Any]:
    return json_format.MessageToDict(msg)


def as_hex_json(msg: Message) -> dict[str, Any]:
    """The protobuf JSON mapping of `msg` with every bytes value as 0x-prefixed hex (the form reads show)."""
    return _hexed(msg.DESCRIPTOR, json_format.MessageToDict(msg))


def _hexed(desc: Any, doc: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in doc.items():
        field = next(f for f in desc.fields if f.json_name == key)
        if field.type == FieldDescriptor.TYPE_BYTES:
            out[key] = [_hex_value(v) for v in value] if field.is_repeated else _hex_value(value)
        elif field.type == FieldDescriptor.TYPE_MESSAGE:
            sub = field.message_type
            out[key] = [_hexed(sub, v) for v in value] if field.is_repeated else _hexed(sub, value)
        else:
            out[key] = value
    return out


def _hex_value(text: str) -> str:
    return "0x" + base64.b64decode(text).hex()


def tampered(msg: pb.Message) -> pb.Message:
    bad = pb.Message()
    bad.CopyFrom(msg)
    bad.signature = bytes(64)
    return bad


async def error_of(resp: Any, status: int) -> dict[str, Any]:
    body = await resp.json()
    assert resp.status == status, body
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message", "details"}, body
    err: dict[str, Any] = body["error"]
    return err


async def wait_committed(client: Client, message_hash: str, timeout: float = 20.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        resp = await client.get(f"/v1/messages/{message_hash}")
        if resp.status == 200:
            out: dict[str, Any] = await resp.json()
            return out
        assert time.monotonic() < deadline, f"{message_hash} not committed"
        await asyncio.sleep(0.03)


@pytest.fixture(scope="module")
def alice(node: NodeProcess) -> RemoteActor:
    c = node.client()
    try:
        return new_account(c, node.authority(), units=2)
    finally:
        c.close()


async def test_submit_json_binary_and_duplicate(gateway_client: Client, alice: RemoteActor) -> None:
    msg = alice.b.account_data(pb.ACCOUNT_FIELD_BIO, "via json")
    resp = await gateway_client.post("/v1/messages", json=as_json(msg))
    assert resp.status == 202
    assert await resp.json() == {"hash": "0x" + msg.hash.hex(), "accepted": True}
    committed = await wait_committed(gateway_client, "0x" + msg.hash.hex())
    assert committed["message"]["data"]["account_data"] == {"field": "bio", "value": "via json"}

    again = await gateway_client.post("/v1/messages", json=as_json(msg))
    err = await error_of(again, 409)
    assert err["code"] == "DUPLICATE_MESSAGE" and err["details"]["grpc_status"] == "ALREADY_EXISTS"

    binary = alice.b.account_data(pb.ACCOUNT_FIELD_WEBSITE, "https://example.org")
    resp = await gateway_client.post("/v1/messages", data=binary.SerializeToString(), headers=PROTOBUF)
    assert resp.status == 202 and (await resp.json())["hash"] == "0x" + binary.hash.hex()
    await wait_committed(gateway_client, "0x" + binary.hash.hex())
    # Field names as in the .proto file, and URL-safe unpadded base64, are protobuf JSON too.
    snake = json_format.MessageToDict(
        alice.b.account_data(pb.ACCOUNT_FIELD_BIO, "snake"), preserving_proto_field_name=True
    )
    snake["hash"] = base64.urlsafe_b64encode(base64.b64decode(snake["hash"])).decode().rstrip("=")
    assert (await gateway_client.post("/v1/messages", json=snake)).status == 202


async def test_dry_run_changes_nothing(gateway_client: Client, alice: RemoteActor) -> None:
    msg = alice.b.account_data(pb.ACCOUNT_FIELD_DISPLAY_NAME, "dry")
    resp = await gateway_client.post("/v1/messages/dry-run", json=as_json(msg))
    assert resp.status == 200
    assert await resp.json() == {"hash": "0x" + msg.hash.hex(), "valid": True, "reason_code": "", "detail": ""}
    bad = await gateway_client.post("/v1/messages/dry-run", data=tampered(msg).SerializeToString(), headers=PROTOBUF)
    out = await bad.json()
    assert bad.status == 200 and out["valid"] is False and out["reason_code"] == "INVALID_SIGNATURE"
    await asyncio.sleep(0.3)  # several block intervals
    err = await error_of(await gateway_client.get(f"/v1/messages/0x{msg.hash.hex()}"), 404)
    assert err["code"] == "NOT_FOUND"


async def test_batch_reports_each_message(gateway_client: Client, alice: RemoteActor) -> None:
    good1 = alice.b.account_data(pb.ACCOUNT_FIELD_AVATAR, "a1")
    bad = tampered(alice.b.account_data(pb.ACCOUNT_FIELD_AVATAR, "a2"))
    good2 = alice.b.account_data(pb.ACCOUNT_FIELD_AVATAR, "a3")
    resp = await gateway_client.post("/v1/messages/batch", json={"messages": [as_json(m) for m in (good1, bad, good2)]})
    assert resp.status == 200
    results = (await resp.json())["results"]
    assert [(r["index"], r["accepted"], r["reason_code"]) for r in results] == [
        (0, True, ""),
        (1, False, "INVALID_SIGNATURE"),
        (2, True, ""),
    ]
    assert results[1]["detail"] and results[1]["hash"] == "0x" + bad.hash.hex()
    # Binary batch: a custody message with a stale nonce is refused on its own.
    stale = alice.b.keychain_authorize(alice.wallet, 0, Secp256k1Key.generate())
    ok = alice.b.account_data(pb.ACCOUNT_FIELD_AVATAR, "a4")
    body = rpc_pb2.BatchSubmitMessagesRequest(messages=[stale, ok]).SerializeToString()
    resp = await gateway_client.post("/v1/messages/batch", data=body, headers=PROTOBUF)
    results = (await resp.json())["results"]
    assert [(r["accepted"], r["reason_code"]) for r in results] == [(False, "NONCE_MISMATCH"), (True, "")]


async def test_node_rejections_map_to_status_and_reason(
    gateway_client: Client, alice: RemoteActor, node: NodeProcess
) -> None:
    async def submit(msg: pb.Message) -> Any:
        return await gateway_client.post("/v1/messages", json=as_json(msg))

    err = await error_of(await submit(tampered(alice.b.account_data(pb.ACCOUNT_FIELD_BIO, "x"))), 400)
    assert err["code"] == "INVALID_SIGNATURE" and err["details"]["grpc_status"] == "INVALID_ARGUMENT"

    stale = alice.b.keychain_authorize(alice.wallet, 7, Secp256k1Key.generate())
    err = await error_of(await submit(stale), 409)
    assert err["code"] == "NONCE_MISMATCH" and err["details"]["grpc_status"] == "FAILED_PRECONDITION"
    assert err["details"]["hash"] == "0x" + stale.hash.hex()  # the node's reason-values, the id 0x-prefixed
    assert "custody nonce must be" in err["message"]

    stranger = RemoteActor()  # no delegated key registered
    err = await error_of(await submit(stranger.b.account_data(pb.ACCOUNT_FIELD_BIO, "who")), 403)
    assert err["code"] == "UNKNOWN_SIGNER"

    key_add = pb.MessageType.ValueType(12)  # the retired KEY_ADD
    retired = pb.MessageData(
        type=key_add, owner_address=alice.address, timestamp=int(time.time()), network=pb.NETWORK_DEVNET
    )
    err = await error_of(await submit(sign_message(retired, alice.key)), 400)
    assert err["code"] == "DISABLED_MESSAGE_TYPE"

    first = alice.b.project_create("dup-name")
    assert (await submit(first)).status == 202
    err = await error_of(await submit(alice.b.project_create("DUP-name")), 409)
    assert err["code"] == "NAME_TAKEN"

    err = await error_of(await submit(alice.b.ref_update(bytes(32), b"refs/heads/main", bytes(32), 1)), 409)
    assert err["code"] == "PROJECT_NOT_FOUND"

    huge = alice.b.project_create("huge", description="x" * 300_000)
    err = await error_of(await submit(huge), 413)
    assert err["code"] == "MESSAGE_TOO_LARGE"

    many = [alice.b.account_data(pb.ACCOUNT_FIELD_BIO, f"b{i}") for i in range(101)]
    resp = await gateway_client.post("/v1/messages/batch", json={"messages": [as_json(m) for m in many]})
    err = await error_of(resp, 413)
    assert err["code"] == "BATCH_TOO_LARGE" and err["details"]["limit"] == 100

    c = node.client()
    unfunded = RemoteActor()
    c.commit(unfunded.b.signer_add(unfunded.wallet, 0))
    c.close()
    err = await error_of(await submit(unfunded.b.project_create("no-room")), 429)
    assert err["code"] == "NO_STORAGE" and err["details"]["grpc_status"] == "RESOURCE_EXHAUSTED"


async def test_invalid_input_is_400_naming_the_field(gateway_client: Client, alice: RemoteActor) -> None:
    post = gateway_client.post
    cases: list[tuple[Any, str]] = [
        (await post("/v1/messages", data=b"{", headers={"Content-Type": "application/json"}), "body"),
        (await post("/v1/messages", json={"data": {"timestamp": "soon"}}), "data.timestamp"),
        (await post("/v1/messages", json={"data": {"type": "MESSAGE_TYPE_NOPE"}}), "data.type"),
        (await post("/v1/messages", json={"nope": 1}), "nope"),
        (await post("/v1/messages", json={"signature": "not base64!"}), "signature"),
        (await post("/v1/messages/batch", json={"messages": [{"hash": 5}]}), "messages.0.hash"),
        (await post("/v1/messages", data=b"\xff\xff\xff", headers=PROTOBUF), "body"),
        (await post("/v1/messages", data=b"", headers={"Content-Type": "application/json"}), "body"),
        (await post("/v1/proofs/verify", json={}), "proof"),
        (await gateway_client.get("/v1/accounts/0x1234"), "ownerAddress"),
        (await gateway_client.get(f"/v1/accounts/0x{alice.address.hex()}/keys?limit=-1"), "limit"),
        (await gateway_client.get(f"/v1/accounts/0x{alice.address.hex()}/keys?limit=many"), "limit"),
        (await gateway_client.get(f"/v1/accounts/0x{alice.address.hex()}/links?type=like"), "type"),
        (await gateway_client.get("/v1/projects?owner_address=alice"), "owner_address"),
        (await gateway_client.get("/v1/blocks/-1"), "number"),
        (await gateway_client.get("/v1/messages?start_block=x"), "start_block"),
        (await gateway_client.get("/v1/blocks?cursor=%24%24"), "cursor"),
    ]
    for resp, field in cases:
        err = await error_of(resp, 400)
        assert err["code"] == "INVALID_ARGUMENT", err
        assert err["details"]["field"] == field, (field, err)
    # Node-side argument checks come back the same way (the node names the field).
    err = await error_of(await gateway_client.get("/v1/links/by-target"), 400)
    assert err["code"] == "INVALID_ARGUMENT" and err["details"]["field"] == "target"
    # Unsupported media type.
    resp = await post("/v1/messages", data=b"hi", headers={"Content-Type": "text/plain"})
    err = await error_of(resp, 415)
    assert err["code"] == "UNSUPPORTED_MEDIA_TYPE" and PROTOBUF["Content-Type"] in err["details"]["accepted"]
    # A value the protobuf JSON parser refuses after schema validation (two members of the body oneof).
    both = as_json(alice.b.account_data(pb.ACCOUNT_FIELD_BIO, "x"))
    both["data"]["linkAdd"] = {}
    err = await error_of(await post("/v1/messages", json=both), 400)
    assert err["details"]["field"] == "body" and "oneof" in err["message"].lower()


async def test_http_errors_have_the_error_body(make_gateway_client: MakeClient) -> None:
    client = await make_gateway_client(max_body_bytes=2048)
    err = await error_of(await client.get("/v1/nothing-here"), 404)
    assert err["code"] == "NOT_FOUND"
    resp = await client.put("/v1/stats")
    err = await error_of(resp, 405)
    assert err["code"] == "METHOD_NOT_ALLOWED" and resp.headers["Allow"] == "GET, HEAD"
    resp = await client.post("/v1/messages", data=b"x" * 4096, headers=PROTOBUF)
    err = await error_of(resp, 413)
    assert err["code"] == "PAYLOAD_TOO_LARGE"


async def test_no_node_is_503(make_gateway_client: MakeClient) -> None:
    client = await make_gateway_client(node_addrs=("127.0.0.1:1",), read_retries=1, request_timeout=3.0)
    err = await error_of(await client.get("/v1/node/status"), 503)
    assert err["code"] == "UNAVAILABLE"
    err = await error_of(await client.get("/v1/health"), 503)
    assert err["code"] == "UNAVAILABLE"


def rpc_error(code: grpc.StatusCode, *trailers: tuple[str, str]) -> grpc.aio.AioRpcError:
    return grpc.aio.AioRpcError(code, grpc.aio.Metadata(), grpc.aio.Metadata(*trailers), "node says no", None)


@pytest.mark.parametrize(
    ("code", "reason", "status"),
    [
        (grpc.StatusCode.NOT_FOUND, "NOT_FOUND", 404),
        (grpc.StatusCode.INVALID_ARGUMENT, "HASH_MISMATCH", 400),
        (grpc.StatusCode.ALREADY_EXISTS, "DUPLICATE_MESSAGE", 409),
        (grpc.StatusCode.FAILED_PRECONDITION, "NONCE_MISMATCH", 409),
        (grpc.StatusCode.PERMISSION_DENIED, "CUSTODY_KEY_REVOKED", 403),
        (grpc.StatusCode.RESOURCE_EXHAUSTED, "MEMPOOL_FULL", 429),
        (grpc.StatusCode.RESOURCE_EXHAUSTED, "MESSAGE_TOO_LARGE", 413),
        (grpc.StatusCode.UNAVAILABLE, "", 503),
        (grpc.StatusCode.DEADLINE_EXCEEDED, "", 504),
        (grpc.StatusCode.DATA_LOSS, "DATA_CORRUPTED", 503),
        (grpc.StatusCode.INTERNAL, "INTERNAL", 500),
        (grpc.StatusCode.UNKNOWN, "", 500),
    ],
)
def test_grpc_status_mapping(code: grpc.StatusCode, reason: str, status: int) -> None:
    trailers = [("reason-code", reason), ("reason-values", '{"expected": 4, "got": 6}')] if reason else []
    got_status, got_code, message, details = grpc_error(rpc_error(code, *trailers))
    assert got_status == status
    assert got_code == (reason or code.name)
    assert message == "node says no" and details["grpc_status"] == code.name
    if reason:
        assert details["expected"] == 4 and details["got"] == 6


async def test_error_middleware_end_to_end(aiohttp_client: Any) -> None:
    async def deadline(request: web.Request) -> web.Response:
        raise rpc_error(grpc.StatusCode.DEADLINE_EXCEEDED)

    async def crash(request: web.Request) -> web.Response:
        raise RuntimeError("secret internals")

    app = web.Application(middlewares=[error_middleware])
    app.router.add_get("/deadline", deadline)
    app.router.add_get("/crash", crash)
    client = await aiohttp_client(app)
    err = await error_of(await client.get("/deadline"), 504)
    assert err["code"] == "DEADLINE_EXCEEDED"
    err = await error_of(await client.get("/crash"), 500)
    assert err == {"code": "INTERNAL", "message": "internal error", "details": {}}


# ---- bytes in JSON writes: 0x-hex (as reads show them) or base64, never a 0x value read as base64 ----


async def test_bytes_as_0x_hex_are_read_as_hex(gateway_client: Client, alice: RemoteActor) -> None:
    """Every bytes field 0x-hex: the hash, signer and signature of the envelope, and the body's ids (a 0x hash
    read as base64 would be 49 bytes, and the node would refuse the message)."""
    msg = alice.b.account_data(pb.ACCOUNT_FIELD_BIO, "hex bytes")
    body = as_hex_json(msg)
    assert body["hash"] == "0x" + msg.hash.hex() and body["data"]["ownerAddress"] == "0x" + alice.address.hex()
    resp = await gateway_client.post("/v1/messages", json=body)
    assert resp.status == 202, await resp.text()
    assert (await resp.json())["hash"] == "0x" + msg.hash.hex()
    await wait_committed(gateway_client, "0x" + msg.hash.hex())
    upper = as_hex_json(alice.b.account_data(pb.ACCOUNT_FIELD_BIO, "upper"))
    upper["hash"] = "0X" + upper["hash"][2:].upper()
    assert (await gateway_client.post("/v1/messages/dry-run", json=upper)).status == 200
    batch = [as_hex_json(alice.b.account_data(pb.ACCOUNT_FIELD_AVATAR, f"h{i}")) for i in range(2)]
    resp = await gateway_client.post("/v1/messages/batch", json={"messages": [batch[0], as_json(msg)]})
    results = (await resp.json())["results"]
    assert results[0]["accepted"] and results[1]["reason_code"] == "DUPLICATE_MESSAGE"


async def test_bytes_that_are_neither_hex_nor_base64_are_400(gateway_client: Client, alice: RemoteActor) -> None:
    body = as_hex_json(alice.b.account_data(pb.ACCOUNT_FIELD_BIO, "bad"))
    for bad in ("0xabc", "0x" + "zz" * 32, "not base64!", "A"):
        resp = await gateway_client.post("/v1/messages", json={**body, "signer": bad})
        err = await error_of(resp, 400)
        assert err["code"] == "INVALID_ARGUMENT" and err["details"]["field"] == "signer", err
    batch = {"messages": [{**body, "hash": "0x123"}]}
    err = await error_of(await gateway_client.post("/v1/messages/batch", json=batch), 400)
    assert err["details"]["field"] == "messages.0.hash"


async def test_a_ref_name_in_plain_hex_is_refused(gateway_client: Client, alice: RemoteActor) -> None:
    """Reads show ref names as plain hex; sent back so, they would read as base64: refused, naming the field."""
    msg = alice.b.ref_update(bytes(32), b"refs/heads/main", bytes(32), 1)
    body = as_hex_json(msg)
    body["data"]["refUpdate"]["refName"] = b"refs/heads/main".hex()
    err = await error_of(await gateway_client.post("/v1/messages/dry-run", json=body), 400)
    assert err["code"] == "INVALID_ARGUMENT" and err["details"]["field"] == "data.refUpdate.refName", err
    assert "0x726566732f" in err["message"]
    body["data"]["refUpdate"]["refName"] = "0x" + b"refs/heads/main".hex()
    resp = await gateway_client.post("/v1/messages/dry-run", json=body)
    assert resp.status == 200 and (await resp.json())["hash"] == "0x" + msg.hash.hex()


def test_hex_bytes_decoding() -> None:
    """The decoder alone (behind the document's pattern): hex first, base64 kept, anything else refused."""
    desc = pb.Message.DESCRIPTOR
    assert hex_bytes(desc, {"hash": "0x" + "ab" * 32})["hash"] == base64.b64encode(b"\xab" * 32).decode()
    assert hex_bytes(desc, {"hash": "0x"})["hash"] == ""
    assert hex_bytes(desc, {"hash": "q83v"})["hash"] == "q83v"  # base64 stays for the parser
    assert hex_bytes(desc, {"signature": 5}) == {"signature": 5}  # the parser names the wrong type
    nested = hex_bytes(desc, {"data": {"owner_address": "0x" + "01" * 20}})
    assert nested["data"]["owner_address"] == base64.b64encode(b"\x01" * 20).decode()
    assert hex_bytes(desc, {"hash": "0xzz"})["hash"] == "0xzz"  # padded base64 (of d3 1c f3) that starts with 0x
    for bad in ("0xabc", "0x" + "zz" * 32, "0x" + "ab" * 31 + "g", "not base64!", "A"):
        with pytest.raises(ApiError) as refused:
            hex_bytes(desc, {"data": {"ownerAddress": bad}})
        assert refused.value.status == 400 and refused.value.details["field"] == "data.ownerAddress"
    with pytest.raises(ApiError):
        hex_bytes(desc, {"data": {"refUpdate": {"refName": b"refs/tags/v1".hex()}}})


async def test_the_document_states_each_write_field_s_byte_encoding(gateway_client: Client) -> None:
    schemas = (await (await gateway_client.get("/v1/openapi.json")).json())["components"]["schemas"]
    envelope = schemas["ProtoJsonMessage"]["properties"]
    for name in ("hash", "signer", "signature"):
        prop = envelope[name]
        assert prop["x-bytes-encoding"] == "hex|base64" and "0x-prefixed hex" in prop["description"]
        assert prop["pattern"].startswith("^(?:0[xX]")
    ref_name = schemas["ProtoJsonRefUpdateBody"]["properties"]["refName"]
    assert "plain hex" in ref_name["description"]
    read = schemas["Project"]["properties"]["project_id"]
    assert read["pattern"] == "^0x([0-9a-f]{2})*$"


async def test_ids_in_error_messages_are_0x(gateway_client: Client) -> None:
    missing = "ab" * 32
    err = await error_of(await gateway_client.get(f"/v1/projects/0x{missing}"), 404)
    assert "0x" + missing in err["message"]
    assert err["message"].count(missing) == err["message"].count("0x" + missing)
    assert with_0x(f"commit {missing} not found") == f"commit 0x{missing} not found"
    assert with_0x(f"commit 0x{missing}") == f"commit 0x{missing}"
