"""Write routes: submit, dry-run and batch-submit signed messages.

Bodies are `chain.v1.Message` (batch: `chain.v1.BatchSubmitMessagesRequest`, i.e. `{"messages": [...]}`)
either in the protobuf JSON mapping (`Content-Type: application/json`: bytes base64, 64-bit integers as
strings or numbers, enums by full name or number, lowerCamelCase or .proto field names) or as binary
protobuf (`Content-Type: application/x-protobuf`). The gateway decodes and forwards; the node verifies.
"""

from __future__ import annotations

import json
from typing import TypeVar

from google.protobuf import json_format
from google.protobuf.message import DecodeError, Message

from chain.v1 import message_pb2 as pb
from chain.v1 import rpc_pb2
from gateway.errors import ApiError, invalid_argument
from gateway.rest import shapes
from gateway.rest.shapes import JsonObject, ref
from gateway.rest.table import Body, Call, Route
from node.errors import Reason

PROTOBUF = "application/x-protobuf"
M = TypeVar("M", bound=Message)


def decode_body(c: Call, cls: type[M]) -> M:
    """The request body as `cls`, from protobuf JSON or binary protobuf (400 naming the problem otherwise)."""
    raw = c.inputs.raw_body
    if c.inputs.content_type == PROTOBUF:
        try:
            return cls.FromString(raw)
        except DecodeError as err:
            message = f"not a binary chain.v1.{cls.DESCRIPTOR.name}: {err}"
            raise invalid_argument("body", message, **{"in": "body"}) from None
    if c.inputs.content_type != "application/json":
        raise ApiError(415, Reason.UNSUPPORTED_MEDIA_TYPE, f"use application/json or {PROTOBUF}")
    try:
        return json_format.ParseDict(json.loads(raw), cls())
    except (json_format.ParseError, ValueError) as err:
        message = f"not chain.v1.{cls.DESCRIPTOR.name} in protobuf JSON: {err}"
        raise invalid_argument("body", message, **{"in": "body"}) from None


async def submit_message(c: Call) -> JsonObject:
    req = rpc_pb2.SubmitMessageRequest(message=decode_body(c, pb.Message))
    resp = await c.write(lambda u, t: u.chain.SubmitMessage(req, timeout=t))
    return shapes.to_json(resp)


async def dry_run_message(c: Call) -> JsonObject:
    req = rpc_pb2.DryRunMessageRequest(message=decode_body(c, pb.Message))
    resp = await c.write(lambda u, t: u.chain.DryRunMessage(req, timeout=t))
    return shapes.to_json(resp)


async def batch_submit_messages(c: Call) -> JsonObject:
    req = decode_body(c, rpc_pb2.BatchSubmitMessagesRequest)
    resp = await c.write(lambda u, t: u.chain.BatchSubmitMessages(req, timeout=t))
    return shapes.to_json(resp)


MESSAGE_BODY = Body(
    ref(shapes.proto_json_name(pb.Message.DESCRIPTOR)),
    f"a signed `chain.v1.Message`: protobuf JSON mapping (application/json) or binary protobuf ({PROTOBUF})",
    {PROTOBUF: {}},
)
BATCH_BODY = Body(
    ref(shapes.proto_json_name(rpc_pb2.BatchSubmitMessagesRequest.DESCRIPTOR)),
    '`chain.v1.BatchSubmitMessagesRequest` (`{"messages": [...]}`): protobuf JSON mapping (application/json) '
    f"or binary protobuf ({PROTOBUF})",
    {PROTOBUF: {}},
)
TAG = "messages"
WRITE_ERRORS = (400, 403, 409, 413, 415, 429)

ROUTES: tuple[Route, ...] = (
    Route(
        "POST",
        "/v1/messages",
        "submitMessage",
        TAG,
        "Submit one signed message (SubmitMessage): verified, validated, placed in the mempool",
        submit_message,
        ref("SubmitMessageResponse"),
        body=MESSAGE_BODY,
        status=202,
        errors=WRITE_ERRORS,
        description=(
            "202 when the node accepted the message into its mempool; it is committed in a later block "
            "(poll `GET /v1/messages/{hash}` or follow `/v1/events/messages`). A rejection answers the "
            "mapped status with the node's reason code, e.g. 400 `INVALID_SIGNATURE`, 409 `NONCE_MISMATCH`."
        ),
    ),
    Route(
        "POST",
        "/v1/messages/dry-run",
        "dryRunMessage",
        TAG,
        "Validate one message against current state without submitting it (DryRunMessage)",
        dry_run_message,
        ref("DryRunMessageResponse"),
        body=MESSAGE_BODY,
        errors=(400, 413, 415),
        description="200 with `valid` and, when invalid, `reason_code` and `detail`; nothing changes.",
    ),
    Route(
        "POST",
        "/v1/messages/batch",
        "batchSubmitMessages",
        TAG,
        "Submit several signed messages; one result per message (BatchSubmitMessages)",
        batch_submit_messages,
        ref("BatchSubmitMessagesResponse"),
        body=BATCH_BODY,
        errors=WRITE_ERRORS,
        description=(
            "200 with `results[i]` = {index, hash, accepted, reason_code, detail} for every message; one bad "
            "message does not fail the others. A batch over the node's limit is refused whole (413 "
            "`BATCH_TOO_LARGE`)."
        ),
    ),
)
