"""Protobuf records as REST JSON, and the JSON Schema of every shape: one rule table drives both.

    shapes.to_json(project)                 # {"project_id": "0x…", "owner_address": "0x…", "status": "active", …}
    shapes.account_summary(get_account_resp)
    shapes.schema_components()              # components/schemas of the OpenAPI document

Rules, applied to every field of every record (so handlers never build dicts by hand):

- bytes: 0x-prefixed lower-case hex ("0x" when empty); ref names (`REF_FIELDS`) are plain lower-case hex
  with no prefix, so names that are not valid UTF-8 survive a round trip;
- 64-bit integers: decimal strings (they can exceed 2^53, the precision of a JS number);
  32-bit integers: JSON numbers; bools: JSON booleans;
- enums: the value's name in lower case without the enum's prefix (`PROJECT_STATUS_ACTIVE` → "active");
- nested records: objects; repeated fields: arrays; every field is always present (proto3 defaults),
  except the members of a `oneof` (the message body), of which only the one that is set appears.

The same module gives the schemas of the writes' request bodies, which are the protobuf JSON mapping
(`google.protobuf.json_format`) with one addition: bytes are 0x-prefixed hex (the form reads show) or base64
(the mapping's own), a value that is `0x` and hex digits always read as hex (gateway.rest.writes decodes them);
64-bit integers as strings or numbers, enums as full names or numbers, field names in lowerCamelCase or as in
the .proto file.
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, TypeAlias, cast

from google.protobuf import message_factory
from google.protobuf.descriptor import Descriptor, EnumDescriptor, FieldDescriptor
from google.protobuf.message import Message

from chain.v1 import block_pb2, keychain_service_pb2, message_pb2, node_info_pb2, proof_pb2, rpc_pb2, state_pb2

Json: TypeAlias = Any
JsonObject: TypeAlias = dict[str, Any]
Schema: TypeAlias = dict[str, Any]
# A schema shared by several places of the document: read-only, copied where it is placed.
SchemaFragment: TypeAlias = Mapping[str, Any]

FD = FieldDescriptor
INT64_TYPES = frozenset({FD.TYPE_INT64, FD.TYPE_UINT64, FD.TYPE_SINT64, FD.TYPE_FIXED64, FD.TYPE_SFIXED64})
INT32_TYPES = frozenset({FD.TYPE_INT32, FD.TYPE_UINT32, FD.TYPE_SINT32, FD.TYPE_FIXED32, FD.TYPE_SFIXED32})
UNSIGNED_TYPES = frozenset({FD.TYPE_UINT32, FD.TYPE_FIXED32, FD.TYPE_UINT64, FD.TYPE_FIXED64})

# Ref names: raw bytes in the protocol, plain hex on REST (spec 2.4).
REF_FIELDS = frozenset(
    {
        ("chain.v1.Ref", "name"),
        ("chain.v1.RefLogEntry", "ref_name"),
        ("chain.v1.MergeRequest", "source_ref"),
        ("chain.v1.MergeRequest", "target_ref"),
        ("chain.v1.RefUpdateBody", "ref_name"),
        ("chain.v1.RefDeleteBody", "ref_name"),
        ("chain.v1.MergeRequestAddBody", "source_ref"),
        ("chain.v1.MergeRequestAddBody", "target_ref"),
    }
)

UINT64_MAX = 2**64 - 1
UINT32_MAX = 2**32 - 1
HEX_PATTERN = "^0x([0-9a-f]{2})*$"
REF_PATTERN = "^([0-9a-f]{2})*$"
UINT64_PATTERN = "^(0|[1-9][0-9]{0,19})$"
# Marks the rule of one `oneof` in a body schema, naming it (request validation names it in its 400).
ONEOF_KEY = "x-oneof"
# What the protobuf JSON parser decodes: either alphabet, padding optional, never 4n+1 data characters.
BASE64_PATTERN = "^([A-Za-z0-9+/_-]{4})*([A-Za-z0-9+/_-]{2,3})?={0,2}$"
# A bytes value of a write: 0x-prefixed hex (either case, an even number of digits) or base64 as above.
WRITE_HEX_PATTERN = "^0[xX]([0-9a-fA-F]{2})*$"


def _at_most(top: int) -> str:
    """A regex (no anchors) of the decimal numbers 0..`top`, written without leading zeros."""
    digits = str(top)
    shorter = f"0|[1-9][0-9]{{0,{len(digits) - 2}}}" if len(digits) > 1 else "0"
    same = [digits]
    for i in range(1, len(digits)):
        if digits[i] != "0":
            same.append(f"{digits[:i]}[0-{int(digits[i]) - 1}][0-9]{{{len(digits) - i - 1}}}")
    if digits[0] > "1":
        same.append(f"[1-{int(digits[0]) - 1}][0-9]{{{len(digits) - 1}}}")
    return "|".join([shorter, *same])


# A uint64 of a write as a decimal string: 0 to 2^64-1 (the protobuf JSON parser refuses more).
WRITE_UINT64_PATTERN = f"^(?:{_at_most(UINT64_MAX)})$"
# Base64 that starts with 0x (1 value in 4096) only padded to a multiple of 4 characters, as protobuf JSON
# serializers write it: 0x and an even number of characters that is not hex (a mistyped id) is refused.
WRITE_BYTES_PATTERN = f"^(?:{WRITE_HEX_PATTERN[1:-1]}|(?:(?!0[xX])|(?=(?:.{{4}})*$)){BASE64_PATTERN[1:-1]})$"
WRITE_BYTES_ENCODING = (
    "bytes: 0x-prefixed hex, as every read shows bytes (a value that is 0x and an even number of hex digits is "
    "always read as hex), or base64, standard or URL-safe, padding optional (the protobuf JSON mapping); base64 "
    "that starts with 0x must be padded, and any other 0x value that is not hex is refused"
)
WRITE_REF_ENCODING = (
    f"{WRITE_BYTES_ENCODING}. A ref name: reads show ref names as plain hex without 0x; write that hex with the "
    "0x prefix (plain hex of a name starting refs/ is refused, never read as base64)"
)
PROTO_JSON_PREFIX = "ProtoJson"


class ShapeError(ValueError):
    """A REST JSON value that does not fit its protobuf field (raised by `from_json`)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


def fields(desc: Any) -> list[FieldDescriptor]:
    """The fields of a message descriptor (pure-Python or upb: the stubs type them apart)."""
    return cast(list[FieldDescriptor], list(desc.fields))


def _message_type(field: FieldDescriptor) -> Descriptor:
    assert field.message_type is not None
    return field.message_type


def _enum_type(field: FieldDescriptor) -> EnumDescriptor:
    assert field.enum_type is not None
    return field.enum_type


def _is_ref(field: FieldDescriptor) -> bool:
    owner = field.containing_type
    return owner is not None and (owner.full_name, field.name) in REF_FIELDS


is_ref_field = _is_ref  # the writes' decoding asks it too (gateway.rest.writes)


def _in_oneof(field: FieldDescriptor) -> bool:
    return field.containing_oneof is not None


def enum_prefix(enum: EnumDescriptor) -> str:
    """`ProjectStatus` → `PROJECT_STATUS_`."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", enum.name).upper() + "_"


def enum_names(enum: EnumDescriptor) -> list[str]:
    prefix = enum_prefix(enum)
    return [v.name.removeprefix(prefix).lower() for v in enum.values]


def enum_name(enum: EnumDescriptor, number: int) -> str:
    value = enum.values_by_number.get(number)
    if value is None:
        return str(number)  # an open enum may carry a number this build does not know
    return value.name.removeprefix(enum_prefix(enum)).lower()


def enum_number(enum: EnumDescriptor, name: str) -> int:
    value = enum.values_by_name.get(enum_prefix(enum) + name.upper())
    if value is None:
        raise ShapeError(enum.name, f"unknown value {name!r}")
    return int(value.number)


# ---- protobuf → REST JSON ----


def _value(field: FieldDescriptor, value: Any) -> Json:
    t = field.type
    if t == FD.TYPE_MESSAGE:
        return reference_json(value)
    if t == FD.TYPE_BYTES:
        return bytes(value).hex() if _is_ref(field) else "0x" + bytes(value).hex()
    if t in INT64_TYPES:
        return str(int(value))
    if t == FD.TYPE_ENUM:
        return enum_name(_enum_type(field), int(value))
    return value


def reference_json(msg: Message) -> JsonObject:
    """A protobuf record in its REST shape, rule by rule (see the module docstring): the definition that
    the encoders compiled at import (`to_json`) must equal (tests/gateway/test_rest_encoder.py)."""
    out: JsonObject = {}
    for field in fields(msg.DESCRIPTOR):
        if _in_oneof(field) and not msg.HasField(field.name):
            continue
        value = getattr(msg, field.name)
        if field.is_repeated:
            out[field.name] = [_value(field, v) for v in value]
        else:
            out[field.name] = _value(field, value)
    return out


def to_json(msg: Message) -> JsonObject:
    """A protobuf record in its REST shape, by the encoder compiled for its type (`reference_json` else)."""
    out: JsonObject = ENCODERS.get(msg.DESCRIPTOR.full_name, reference_json)(msg)
    return out


def to_json_list(items: Sequence[Message]) -> list[JsonObject]:
    """The records of a repeated field (one type) in their REST shape: the encoder looked up once."""
    if not items:
        return []
    encode = ENCODERS.get(items[0].DESCRIPTOR.full_name, reference_json)
    return [encode(m) for m in items]


# ---- the same rules compiled once per message type (the read path's encoders) ----

Encoder: TypeAlias = Callable[[Any], Json]


class _EnumNames(dict[int, str]):
    """An enum's REST names by number; a number this build does not know reads as its decimal text."""

    def __missing__(self, number: int) -> str:
        return str(number)


def _enum_names(enum: EnumDescriptor) -> _EnumNames:
    return _EnumNames({v.number: enum_name(enum, v.number) for v in enum.values})


def _value_source(field: FieldDescriptor, value: str, names: dict[str, Any], message_names: Mapping[str, str]) -> str:
    """The expression that converts `value` (source text) of this field's type to its REST form."""
    t = field.type
    if t == FD.TYPE_MESSAGE:
        return f"{message_names[_message_type(field).full_name]}({value})"
    if t == FD.TYPE_BYTES:
        return f"{value}.hex()" if _is_ref(field) else f'"0x" + {value}.hex()'
    if t in INT64_TYPES:
        return f"str({value})"
    if t == FD.TYPE_ENUM:
        name = f"enum_{len(names)}"
        names[name] = _enum_names(_enum_type(field))
        return f"{name}[{value}]"
    return value


def _encoder_source(desc: Descriptor, names: dict[str, Any], message_names: Mapping[str, str]) -> str:
    """`def encode(msg)` for one message type: one statement per field, in field order, the leading fields
    that are not oneof members in one dict display. A field named like a Python keyword is read with getattr."""
    head: list[str] = []
    body: list[str] = []
    for f in fields(desc):
        plain = f.name.isidentifier() and not keyword.iskeyword(f.name)
        read = f"msg.{f.name}" if plain else f"getattr(msg, {f.name!r})"
        if f.is_repeated:
            item = _value_source(f, "v", names, message_names)
            if item == "v":  # scalars as they are: a slice of the container is a list
                value = f"{read}[:]"
            else:  # the container read once, and an empty one not iterated (a comprehension's frame saved)
                held = f"r{f.number}"
                value = f"[{item} for v in {held}] if ({held} := {read}) else []"
        else:
            value = _value_source(f, read, names, message_names)
        if _in_oneof(f):
            body.append(f"    if msg.HasField({f.name!r}):\n        out[{f.name!r}] = {value}")
        elif body:
            body.append(f"    out[{f.name!r}] = {value}")
        else:
            head.append(f"{f.name!r}: {value}")
    return "\n".join(["def encode(msg):", f"    out = {{{', '.join(head)}}}", *body, "    return out"])


def _all_messages(files: Iterable[Any]) -> dict[str, Descriptor]:
    found: dict[str, Descriptor] = {}
    stack: list[Descriptor] = [d for f in files for d in f.DESCRIPTOR.message_types_by_name.values()]
    while stack:
        desc = stack.pop()
        if desc.full_name not in found:
            found[desc.full_name] = desc
            stack.extend(desc.nested_types)
            stack.extend(_message_type(f) for f in fields(desc) if f.type == FD.TYPE_MESSAGE)
    return found


def compile_encoders(files: Iterable[Any]) -> Mapping[str, Encoder]:
    """An encoder per message type of these generated modules, equal to `reference_json` (map fields,
    which no REST record has, are left to it), generated as Python source at import: a function per type
    that reads each field once and converts it inline (no per-field loop or plan tuple per call). A nested
    record's encoder is found through the generated functions' shared globals, filled in once all exist."""
    descs = {n: d for n, d in _all_messages(files).items() if not d.GetOptions().map_entry}
    names: dict[str, Any] = {"__builtins__": {"getattr": getattr, "list": list, "str": str}}
    message_names = {name: f"message_{i}" for i, name in enumerate(descs)}
    encoders: dict[str, Encoder] = {}
    for name, desc in descs.items():
        if any(f.type == FD.TYPE_MESSAGE and _message_type(f).full_name not in descs for f in fields(desc)):
            encoders[name] = reference_json
            continue
        scope: dict[str, Any] = {}
        exec(compile(_encoder_source(desc, names, message_names), f"<encoder {name}>", "exec"), names, scope)
        encoders[name] = scope["encode"]
    names.update({message_names[name]: encoder for name, encoder in encoders.items()})
    return MappingProxyType(encoders)


ENCODERS = compile_encoders((block_pb2, message_pb2, node_info_pb2, proof_pb2, rpc_pb2, state_pb2))


def account_summary(resp: rpc_pb2.GetAccountResponse) -> JsonObject:
    """The account row flattened, with the first page of keys, custody keys and verifications."""
    out = to_json(resp.account)
    out["storage_units"] = resp.storage_units
    out["keys"] = to_json_list(resp.keys)
    out["custody_keys"] = to_json_list(resp.custody_keys)
    out["verifications"] = to_json_list(resp.verifications)
    return out


# ---- REST JSON → protobuf (for bodies that carry a record in its REST shape) ----


def _from_value(field: FieldDescriptor, value: Json, where: str) -> Any:
    t = field.type
    if t == FD.TYPE_MESSAGE:
        if not isinstance(value, Mapping):
            raise ShapeError(where, "must be an object")
        return from_json(_message_type(field), value, where)
    if t == FD.TYPE_BYTES:
        if not isinstance(value, str):
            raise ShapeError(where, "must be a hex string")
        digits = value if _is_ref(field) else value.removeprefix("0x")
        try:
            return bytes.fromhex(digits)
        except ValueError:
            raise ShapeError(where, "must be hex") from None
    if t in INT64_TYPES or t in INT32_TYPES:
        try:
            number = int(value)
        except (TypeError, ValueError):
            raise ShapeError(where, "must be an integer") from None
        top = UINT64_MAX if t in INT64_TYPES else UINT32_MAX
        if not 0 <= number <= top:
            raise ShapeError(where, f"must be between 0 and {top}")
        return number
    if t == FD.TYPE_ENUM:
        return enum_number(_enum_type(field), str(value))
    return value


def from_json(desc: Descriptor, data: Mapping[str, Json], where: str = "") -> Any:
    """The inverse of `to_json` for a record type (unknown keys are refused)."""
    cls = _message_class(desc)
    msg = cls()
    for key, value in data.items():
        field = desc.fields_by_name.get(key)
        path = f"{where}.{key}" if where else key
        if field is None:
            raise ShapeError(path, "unknown field")
        try:
            if field.is_repeated:
                if not isinstance(value, list):
                    raise ShapeError(path, "must be an array")
                items = [_from_value(field, v, f"{path}[{i}]") for i, v in enumerate(value)]
                if field.type == FD.TYPE_MESSAGE:
                    getattr(msg, key).extend(items)
                else:
                    getattr(msg, key)[:] = items
            elif field.type == FD.TYPE_MESSAGE:
                getattr(msg, key).CopyFrom(_from_value(field, value, path))
            else:
                setattr(msg, key, _from_value(field, value, path))
        except (TypeError, ValueError) as exc:
            if isinstance(exc, ShapeError):
                raise
            raise ShapeError(path, str(exc)) from None
    return msg


def _message_class(desc: Descriptor) -> type[Message]:
    return message_factory.GetMessageClass(desc)


# ---- JSON Schema of the REST shapes ----


def ref(name: str) -> Schema:
    return {"$ref": f"#/components/schemas/{name}"}


def _field_schema(field: FieldDescriptor) -> Schema:
    t = field.type
    if t == FD.TYPE_MESSAGE:
        return ref(_message_type(field).name)
    if t == FD.TYPE_BYTES:
        if _is_ref(field):
            return {"type": "string", "pattern": REF_PATTERN, "description": "ref name, hex-encoded bytes"}
        return {"type": "string", "pattern": HEX_PATTERN}
    if t in INT64_TYPES:
        return {"type": "string", "pattern": UINT64_PATTERN, "description": "uint64 as a decimal string"}
    if t in INT32_TYPES:
        low = 0 if t in UNSIGNED_TYPES else -(2**31)
        high = UINT32_MAX if t in UNSIGNED_TYPES else 2**31 - 1
        return {"type": "integer", "minimum": low, "maximum": high}
    if t == FD.TYPE_ENUM:
        return {"type": "string", "enum": enum_names(_enum_type(field))}
    if t == FD.TYPE_BOOL:
        return {"type": "boolean"}
    if t == FD.TYPE_STRING:
        return {"type": "string"}
    return {"type": "number"}


def message_schema(desc: Descriptor) -> Schema:
    props: Schema = {}
    required: list[str] = []
    for field in fields(desc):
        one = _field_schema(field)
        props[field.name] = {"type": "array", "items": one} if field.is_repeated else one
        if not _in_oneof(field):
            required.append(field.name)
    schema: Schema = {"type": "object", "properties": props, "required": required, "additionalProperties": False}
    oneofs = [o for o in desc.oneofs if o.fields]
    if oneofs:
        members = ", ".join(f.name for o in oneofs for f in o.fields)
        schema["description"] = f"at most one of: {members} (the one that is set)"
        schema["maxProperties"] = len(required) + len(oneofs)
    return schema


def _walk(roots: Iterable[Descriptor]) -> dict[str, Descriptor]:
    seen: dict[str, Descriptor] = {}
    stack = list(roots)
    while stack:
        desc = stack.pop()
        if desc.name in seen:
            continue
        seen[desc.name] = desc
        stack.extend(_message_type(f) for f in fields(desc) if f.type == FD.TYPE_MESSAGE)
    return seen


REST_ROOTS: tuple[Descriptor, ...] = (
    state_pb2.Project.DESCRIPTOR,
    state_pb2.Account.DESCRIPTOR,
    state_pb2.CustodyKey.DESCRIPTOR,
    state_pb2.KeyEntry.DESCRIPTOR,
    state_pb2.Ref.DESCRIPTOR,
    state_pb2.RefLogEntry.DESCRIPTOR,
    state_pb2.Commit.DESCRIPTOR,
    state_pb2.Collaborator.DESCRIPTOR,
    state_pb2.MergeRequest.DESCRIPTOR,
    state_pb2.Verification.DESCRIPTOR,
    state_pb2.Link.DESCRIPTOR,
    state_pb2.Reaction.DESCRIPTOR,
    block_pb2.Block.DESCRIPTOR,
    block_pb2.CommittedMessage.DESCRIPTOR,
    proof_pb2.MerkleProof.DESCRIPTOR,
    proof_pb2.StorageQuotaProof.DESCRIPTOR,
    node_info_pb2.NodeStatus.DESCRIPTOR,
    node_info_pb2.ChainStats.DESCRIPTOR,
    node_info_pb2.SnapshotInfo.DESCRIPTOR,
    node_info_pb2.MempoolInfo.DESCRIPTOR,
    keychain_service_pb2.GetWebAuthnPolicyResponse.DESCRIPTOR,
    rpc_pb2.SubmitMessageResponse.DESCRIPTOR,
    rpc_pb2.SubmitResult.DESCRIPTOR,
    rpc_pb2.BatchSubmitMessagesResponse.DESCRIPTOR,
    rpc_pb2.DryRunMessageResponse.DESCRIPTOR,
    rpc_pb2.GetOperationProofResponse.DESCRIPTOR,
    rpc_pb2.GetExclusionProofResponse.DESCRIPTOR,
    rpc_pb2.VerifyOperationProofResponse.DESCRIPTOR,
    rpc_pb2.GetHealthResponse.DESCRIPTOR,
)


def account_summary_schema() -> Schema:
    schema = message_schema(state_pb2.Account.DESCRIPTOR)
    props = schema["properties"]
    for name, item in (("keys", "KeyEntry"), ("custody_keys", "CustodyKey"), ("verifications", "Verification")):
        props[name] = {"type": "array", "items": ref(item)}
        schema["required"].append(name)
    schema["description"] = (
        "The account row with the first page (up to 200) of its delegated keys, custody keys (a snapshot) "
        "and verifications; `custody_nonce` is a decimal string."
    )
    return schema


def schema_components() -> dict[str, Schema]:
    """Schemas of every REST shape (by record name), of the account summary and of the write bodies."""
    out = {name: message_schema(desc) for name, desc in sorted(_walk(REST_ROOTS).items())}
    out["AccountSummary"] = account_summary_schema()
    out.update(proto_json_components())
    return out


# ---- JSON Schema of the protobuf JSON mapping (write bodies) ----


def proto_json_name(desc: Descriptor) -> str:
    return PROTO_JSON_PREFIX + desc.name


def _proto_json_field(field: FieldDescriptor) -> Schema:
    t = field.type
    if t == FD.TYPE_MESSAGE:
        return ref(proto_json_name(_message_type(field)))
    if t == FD.TYPE_BYTES:
        encoding = WRITE_REF_ENCODING if _is_ref(field) else WRITE_BYTES_ENCODING
        return {
            "type": "string",
            "pattern": WRITE_BYTES_PATTERN,
            "description": encoding,
            "x-bytes-encoding": "hex|base64",
        }
    if t in INT64_TYPES:
        return {
            "anyOf": [
                {"type": "integer", "minimum": 0, "maximum": UINT64_MAX},
                {"type": "string", "pattern": WRITE_UINT64_PATTERN},
            ]
        }
    if t in INT32_TYPES:
        return {"type": "integer", "minimum": 0, "maximum": UINT32_MAX}
    if t == FD.TYPE_ENUM:
        names = [v.name for v in _enum_type(field).values]
        return {"anyOf": [{"type": "string", "enum": names}, {"type": "integer", "minimum": 0, "maximum": 2**31 - 1}]}
    if t == FD.TYPE_BOOL:
        return {"type": "boolean"}
    return {"type": "string"}


def proto_json_schema(desc: Descriptor) -> Schema:
    props: Schema = {}
    for field in fields(desc):
        one = _proto_json_field(field)
        prop = {"type": "array", "items": one} if field.is_repeated else one
        props[field.json_name] = prop
        props[field.name] = prop
    schema: Schema = {
        "type": "object",
        "properties": props,
        "additionalProperties": False,
        "description": f"`chain.v1.{desc.name}` in the protobuf JSON mapping",
    }
    if desc.oneofs:
        schema["allOf"] = [_one_member(oneof, list(props)) for oneof in desc.oneofs]
    return schema


def _spellings(field: FieldDescriptor) -> list[str]:
    return list(dict.fromkeys((field.json_name, field.name)))


def _one_member(oneof: Any, names: list[str]) -> Schema:
    """At most one member of a `oneof`, in one spelling (the protobuf JSON parser refuses a second, even the
    same member's other spelling; a plain field may appear in both, the last wins): the property names are
    those outside the oneof and one member's name."""
    members = {name for f in oneof.fields for name in _spellings(f)}
    rest = [n for n in names if n not in members]
    variants = [{"propertyNames": {"enum": [*rest, name]}} for f in oneof.fields for name in _spellings(f)]
    return {"anyOf": [{"propertyNames": {"enum": rest}}, *variants], ONEOF_KEY: oneof.name}


PROTO_JSON_ROOTS: tuple[Descriptor, ...] = (
    message_pb2.Message.DESCRIPTOR,
    rpc_pb2.BatchSubmitMessagesRequest.DESCRIPTOR,
)


def proto_json_components() -> dict[str, Schema]:
    return {proto_json_name(d): proto_json_schema(d) for _, d in sorted(_walk(PROTO_JSON_ROOTS).items())}
