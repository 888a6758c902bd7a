"""``chainctl query RPC field=value ...``: any read RPC, generically.

Arguments map onto the request message through the protobuf JSON mapping
(``google.protobuf.json_format``), after these conveniences:

- bytes fields take ``0x``-hex (or bare even-length hex); ``text:...`` or any non-hex value is taken as
  UTF-8 (so ``ref_name=refs/heads/main`` works), ``b64:...`` as base64;
- enum fields take the full name, the name without its prefix (``type=STAR``) or the number;
- message fields take JSON (``proof=@proof.json`` reads a file), with bytes as 0x-hex inside too;
- a repeated field takes the argument several times (``types=REF_UPDATE types=COMMIT_BUNDLE``).

The answer is JSON (bytes as 0x-hex, enums by name, proto field names). ``--all`` follows
``next_page_token`` and concatenates the repeated fields of every page.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from google.protobuf import json_format
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message as ProtoMessage

from chain.v1 import keychain_service_pb2, rpc_pb2, service_pb2
from node.cli.common import HEX_RE, CliError, Context, dump_json
from node.cli.protojson import FieldDesc, to_json
from node.errors import CliCode

WRITE_RPCS = frozenset({"SubmitMessage", "BatchSubmitMessages"})
MAX_PAGES = 10_000
INT_TYPES = frozenset(
    {
        FieldDescriptor.TYPE_INT32,
        FieldDescriptor.TYPE_INT64,
        FieldDescriptor.TYPE_UINT32,
        FieldDescriptor.TYPE_UINT64,
        FieldDescriptor.TYPE_SINT32,
        FieldDescriptor.TYPE_SINT64,
        FieldDescriptor.TYPE_FIXED32,
        FieldDescriptor.TYPE_FIXED64,
        FieldDescriptor.TYPE_SFIXED32,
        FieldDescriptor.TYPE_SFIXED64,
    }
)


@dataclass(frozen=True)
class Rpc:
    service: str  # "chain" or "keychain"
    method: FieldDesc

    @property
    def name(self) -> str:
        return str(self.method.name)

    def request(self) -> ProtoMessage:
        cls: type[ProtoMessage] = getattr(rpc_pb2, self.method.input_type.name)
        return cls()


def read_rpcs() -> dict[str, Rpc]:
    """Every unary read RPC of ChainService (and the KeychainService reads), by name."""
    out: dict[str, Rpc] = {}
    for service, desc in (
        ("chain", service_pb2.DESCRIPTOR.services_by_name["ChainService"]),
        ("keychain", keychain_service_pb2.DESCRIPTOR.services_by_name["KeychainService"]),
    ):
        for m in desc.methods:
            if m.server_streaming or m.client_streaming or m.name in WRITE_RPCS:
                continue
            out[m.name] = Rpc(service, m)
    return out


def find_rpc(name: str) -> Rpc:
    rpcs = read_rpcs()
    wanted = name.replace("-", "").replace("_", "").lower()
    for rpc_name, rpc in rpcs.items():
        if rpc_name.lower() == wanted:
            return rpc
    raise CliError(CliCode.UNKNOWN_RPC, f"{name!r} is not a read RPC; `chainctl query --list` lists them")


# ---- arguments -> request ----


def _bytes_json(text: str) -> str:
    """A bytes argument as the base64 the JSON mapping wants."""
    if text.startswith("b64:"):
        return text[4:]
    if text.startswith("text:"):
        data = text[5:].encode("utf-8")
    elif text.startswith(("0x", "0X")):
        raw = text[2:]
        if not HEX_RE.match(raw) or len(raw) % 2:
            raise CliError(CliCode.INVALID_ARGUMENT, f"{text!r} is not hex")
        data = bytes.fromhex(raw)
    elif text and len(text) % 2 == 0 and HEX_RE.match(text):
        data = bytes.fromhex(text)
    else:
        data = text.encode("utf-8")
    return base64.b64encode(data).decode("ascii")


def _enum_json(fd: FieldDesc, text: str) -> str | int:
    enum = fd.enum_type
    try:
        return int(text, 0)
    except ValueError:
        pass
    upper = text.upper().replace("-", "_")
    prefix = "".join("_" + c if c.isupper() else c for c in enum.name).lstrip("_").upper() + "_"
    for candidate in (upper, prefix + upper):
        if candidate in enum.values_by_name:
            return candidate
    names = ", ".join(v.name.removeprefix(prefix) for v in enum.values)
    raise CliError(CliCode.INVALID_ARGUMENT, f"{fd.name}: {text!r} is not one of {names}")


def _nested_json(desc: FieldDesc, value: Any) -> Any:
    """JSON for a message field: convert 0x-hex inside bytes fields to base64, recursively."""
    if not isinstance(value, dict):
        return value
    out: dict[str, Any] = {}
    for key, item in value.items():
        fd = desc.fields_by_name.get(key) or _by_json_name(desc, key)
        if fd is None:
            out[key] = item
            continue
        convert = _json_item_converter(fd)
        out[key] = [convert(v) for v in item] if fd.is_repeated and isinstance(item, list) else convert(item)
    return out


def _json_item_converter(fd: FieldDesc) -> Any:
    if fd.type == FieldDescriptor.TYPE_MESSAGE:
        return lambda v: _nested_json(fd.message_type, v)
    if fd.type == FieldDescriptor.TYPE_BYTES:
        return lambda v: _bytes_json(v) if isinstance(v, str) and v.startswith(("0x", "0X")) else v
    return lambda v: v


def _by_json_name(desc: FieldDesc, name: str) -> FieldDesc | None:
    for fd in desc.fields:
        if fd.json_name == name:
            return fd
    return None


def _scalar_arg(fd: FieldDesc, text: str) -> Any:
    if fd.type == FieldDescriptor.TYPE_BYTES:
        return _bytes_json(text)
    if fd.type == FieldDescriptor.TYPE_ENUM:
        return _enum_json(fd, text)
    if fd.type in INT_TYPES:
        try:
            return int(text, 0)
        except ValueError:
            raise CliError(CliCode.INVALID_ARGUMENT, f"{fd.name}: {text!r} is not an integer") from None
    if fd.type == FieldDescriptor.TYPE_BOOL:
        lowered = text.lower()
        if lowered not in ("true", "false", "1", "0", "yes", "no"):
            raise CliError(CliCode.INVALID_ARGUMENT, f"{fd.name}: {text!r} is not true/false")
        return lowered in ("true", "1", "yes")
    if fd.type in (FieldDescriptor.TYPE_FLOAT, FieldDescriptor.TYPE_DOUBLE):
        return float(text)
    if fd.type == FieldDescriptor.TYPE_MESSAGE:
        raw = Path(text[1:]).read_text(encoding="utf-8") if text.startswith("@") else text
        try:
            return _nested_json(fd.message_type, json.loads(raw))
        except json.JSONDecodeError as exc:
            raise CliError(CliCode.INVALID_ARGUMENT, f"{fd.name}: not JSON ({exc})") from None
    return text


def build_request(rpc: Rpc, fields: list[str]) -> ProtoMessage:
    req = rpc.request()
    desc = req.DESCRIPTOR
    doc: dict[str, Any] = {}
    for item in fields:
        key, sep, value = item.partition("=")
        if not sep:
            raise CliError(CliCode.INVALID_ARGUMENT, f"{item!r}: arguments are field=value")
        fd = desc.fields_by_name.get(key) or _by_json_name(desc, key)
        if fd is None:
            known = ", ".join(f.name for f in desc.fields) or "none"
            raise CliError(CliCode.INVALID_ARGUMENT, f"{rpc.name} has no field {key!r} (fields: {known})")
        if fd.is_repeated:
            if value.startswith("[") and fd.type != FieldDescriptor.TYPE_MESSAGE:
                doc.setdefault(fd.name, []).extend(_scalar_arg(fd, str(v)) for v in json.loads(value))
            else:
                doc.setdefault(fd.name, []).append(_scalar_arg(fd, value))
        else:
            doc[fd.name] = _scalar_arg(fd, value)
    try:
        json_format.ParseDict(doc, req)
    except json_format.ParseError as exc:
        raise CliError(CliCode.INVALID_ARGUMENT, str(exc)) from None
    return req


# ---- calling ----


def call(ctx: Context, rpc: Rpc, req: ProtoMessage) -> ProtoMessage:
    stub = ctx.client.stub if rpc.service == "chain" else ctx.client.keychain
    method = getattr(stub, rpc.name)
    resp: ProtoMessage = method(req, timeout=ctx.timeout)
    return resp


def call_all(ctx: Context, rpc: Rpc, req: ProtoMessage) -> ProtoMessage:
    """Follow next_page_token, appending every page's repeated fields to the first answer."""
    first = call(ctx, rpc, req)
    if "page_token" not in req.DESCRIPTOR.fields_by_name or "next_page_token" not in first.DESCRIPTOR.fields_by_name:
        return first
    token = str(getattr(first, "next_page_token"))  # noqa: B009 - the field is not known statically
    pages = 1
    while token and pages < MAX_PAGES:
        req_next = type(req)()
        req_next.CopyFrom(req)
        setattr(req_next, "page_token", token)  # noqa: B010
        page = call(ctx, rpc, req_next)
        for fd in page.DESCRIPTOR.fields:
            if fd.is_repeated:
                getattr(first, fd.name).extend(getattr(page, fd.name))
        token = str(getattr(page, "next_page_token"))  # noqa: B009
        pages += 1
    setattr(first, "next_page_token", token)  # noqa: B010
    return first


def rpc_listing() -> list[dict[str, Any]]:
    docs = []
    for name, rpc in sorted(read_rpcs().items()):
        fields = []
        for fd in rpc.method.input_type.fields:
            kind = fd.message_type.name if fd.type == FieldDescriptor.TYPE_MESSAGE else _type_name(fd)
            fields.append(f"{fd.name}:{kind}{'[]' if fd.is_repeated else ''}")
        docs.append({"rpc": name, "service": rpc.service, "fields": fields})
    return docs


def _type_name(fd: FieldDesc) -> str:
    if fd.type == FieldDescriptor.TYPE_ENUM:
        return str(fd.enum_type.name)
    names = {v: k.removeprefix("TYPE_").lower() for k, v in vars(FieldDescriptor).items() if k.startswith("TYPE_")}
    return names.get(fd.type, "?")


def query(ctx: Context, args: Any) -> None:
    if args.list or not args.rpc:
        docs = rpc_listing()
        ctx.emit({"rpcs": docs}, [f"{d['rpc']}  {' '.join(d['fields'])}" for d in docs])
        return
    rpc = find_rpc(args.rpc)
    req = build_request(rpc, args.fields)
    resp = call_all(ctx, rpc, req) if args.all else call(ctx, rpc, req)
    ctx.out.write(dump_json(to_json(resp)) + "\n")
