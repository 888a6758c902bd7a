"""Protobuf messages as chainctl prints them in JSON: bytes as 0x-hex, enums by name, proto field names.

Imports protobuf; used by the commands that talk to a node (never by the offline ones).
"""

from __future__ import annotations

from typing import Any, TypeAlias

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message as ProtoMessage

from chain.v1 import block_pb2
from node.cli.common import hex0x

# Descriptors come from either the pure-Python or the upb implementation; their stubs disagree.
FieldDesc: TypeAlias = Any


def _scalar_json(fd: FieldDesc, value: Any) -> Any:
    if fd.type == FieldDescriptor.TYPE_BYTES:
        return hex0x(bytes(value))
    if fd.type == FieldDescriptor.TYPE_ENUM:
        enum_value = fd.enum_type.values_by_number.get(int(value))
        return enum_value.name if enum_value is not None else int(value)
    if fd.type == FieldDescriptor.TYPE_MESSAGE:
        return to_json(value)
    return value


def to_json(msg: ProtoMessage) -> dict[str, Any]:
    """A protobuf message as JSON: every scalar (defaults included), set sub-messages, bytes as 0x-hex."""
    out: dict[str, Any] = {}
    fields: list[FieldDesc] = list(msg.DESCRIPTOR.fields)
    for fd in fields:
        value = getattr(msg, fd.name)
        if fd.is_repeated:
            if fd.type == FieldDescriptor.TYPE_MESSAGE and fd.message_type.GetOptions().map_entry:
                value_fd = fd.message_type.fields_by_name["value"]
                out[fd.name] = {str(k): _scalar_json(value_fd, v) for k, v in value.items()}
            else:
                out[fd.name] = [_scalar_json(fd, v) for v in value]
        elif fd.has_presence and not msg.HasField(fd.name):
            continue
        else:
            out[fd.name] = _scalar_json(fd, value)
    return out


def committed_json(cm: block_pb2.CommittedMessage) -> dict[str, Any]:
    return {"message_hash": hex0x(bytes(cm.message.hash)), "block_number": cm.block_number}
