"""Write routes: submit, dry-run and batch-submit signed messages.

Bodies are `chain.v1.Message` (batch: `chain.v1.BatchSubmitMessagesRequest`, i.e. `{"messages": [...]}`)
either in the protobuf JSON mapping (`Content-Type: application/json`: 64-bit integers as strings or numbers,
enums by full name or number, lowerCamelCase or .proto field names) or as binary protobuf
(`Content-Type: application/x-protobuf`). The gateway decodes and forwards; the node verifies.

Bytes in JSON are 0x-prefixed hex, the form every read shows, or base64, the protobuf JSON mapping's
(`hex_bytes`): a value that is `0x` and an even number of hex digits is hex, never base64; any other value must
be base64, and base64 that starts with `0x` must be padded (as protobuf JSON serializers write it), so a
mistyped 0x id is refused rather than read as base64; a value that is neither is a 400 `INVALID_ARGUMENT`
naming the field. A ref name sent as the plain
hex reads show (no 0x) would read as base64: plain hex of a name that starts with `refs/` is refused.
"""

from __future__ import annotations

import base64
import json
import re
from typing import Any, TypeVar

from aiohttp import web
from google.protobuf import json_format
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import DecodeError, Message

from chain.v1 import message_pb2 as pb
from chain.v1 import rpc_pb2
from gateway.errors import ApiError, invalid_argument
from gateway.rest import shapes
from gateway.rest.shapes import ref
from gateway.rest.table import Body, Call, Route
from node.errors import Reason

PROTOBUF = "application/x-protobuf"
M = TypeVar("M", bound=Message)
FD = FieldDescriptor
HEX_VALUE = re.compile(r"0[xX]((?:[0-9a-fA-F]{2})*)")
WRITE_BYTES = re.compile(shapes.WRITE_BYTES_PATTERN)
PLAIN_HEX_REF = re.compile(r"(?:[0-9a-fA-F]{2})*")
REFS_HEX = b"refs/".hex()


def _bytes_value(field: FieldDescriptor, value: Any, path: str) -> Any:
    """One bytes value of a JSON body as the base64 the protobuf JSON parser reads (see the module docstring)."""
    if not isinstance(value, str):
        return value  # the parser refuses it, naming the type
    hex_digits = HEX_VALUE.fullmatch(value)
    if hex_digits is not None:
        return base64.b64encode(bytes.fromhex(hex_digits.group(1))).decode("ascii")
    if shapes.is_ref_field(field) and PLAIN_HEX_REF.fullmatch(value) and value.lower().startswith(REFS_HEX):
        raise invalid_argument(
            path,
            f"{path}: {value[:80]!r} is a ref name in plain hex, as reads show it: write it as 0x{value[:16]}…",
            expected="0x-prefixed hex or base64",
            **{"in": "body"},
        )
    if WRITE_BYTES.fullmatch(value):  # base64, padded when it starts with 0x (the document's pattern)
        return value
    shown = value if len(value) <= 80 else value[:77] + "..."
    raise invalid_argument(
        path,
        f"{path}: {shown!r} is neither 0x-prefixed hex (an even number of digits) nor base64",
        expected="0x-prefixed hex or base64",
        **{"in": "body"},
    )


def _field(desc: Descriptor, key: str) -> FieldDescriptor | None:
    found: FieldDescriptor | None = desc.fields_by_name.get(key)
    if found is None:
        found = next((f for f in shapes.fields(desc) if f.json_name == key), None)
    return found


def hex_bytes(desc: Descriptor | Any, doc: Any, where: str = "") -> Any:
    """The JSON document of a `desc` message with every 0x-hex bytes value in base64 (the protobuf JSON
    mapping's form); anything else is left for the parser to judge."""
    if not isinstance(doc, dict):
        return doc
    out: dict[str, Any] = {}
    for key, value in doc.items():
        field = _field(desc, key)
        path = f"{where}.{key}" if where else key
        if field is None or field.type not in (FD.TYPE_MESSAGE, FD.TYPE_BYTES):
            out[key] = value
        elif field.is_repeated and isinstance(value, list):
            out[key] = [_one(field, v, f"{path}[{i}]") for i, v in enumerate(value)]
        else:
            out[key] = _one(field, value, path)
    return out


def _one(field: FieldDescriptor, value: Any, path: str) -> Any:
    if field.type == FD.TYPE_BYTES:
        return _bytes_value(field, value, path)
    assert field.message_type is not None
    return hex_bytes(field.message_type, value, path)


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
        doc = hex_bytes(cls.DESCRIPTOR, json.loads(raw))
        return json_format.ParseDict(doc, cls())
    except (json_format.ParseError, ValueError) as err:
        message = f"not chain.v1.{cls.DESCRIPTOR.name} in protobuf JSON: {err}"
        raise invalid_argument("body", message, **{"in": "body"}) from None


async def submit_message(c: Call) -> web.Response:
    req = rpc_pb2.SubmitMessageRequest(message=decode_body(c, pb.Message))
    resp = await c.write(lambda u, t: u.chain.SubmitMessage(req, timeout=t))
    return c.json(shapes.to_json(resp))


async def dry_run_message(c: Call) -> web.Response:
    req = rpc_pb2.DryRunMessageRequest(message=decode_body(c, pb.Message))
    resp = await c.write(lambda u, t: u.chain.DryRunMessage(req, timeout=t))
    return c.json(shapes.to_json(resp))


async def batch_submit_messages(c: Call) -> web.Response:
    req = decode_body(c, rpc_pb2.BatchSubmitMessagesRequest)
    resp = await c.write(lambda u, t: u.chain.BatchSubmitMessages(req, timeout=t))
    return c.json(shapes.to_json(resp))


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
