"""What one message type is: its body, who may sign it, its time rule, its check and its handler.

`MessageKind` describes one type; the table of every type is `node.state.registry`. This module is a
leaf (no handler imports it back), so authorization and the query side can use it freely.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from google.protobuf.message import Message

from chain.v1 import message_pb2 as pb
from node.constants import MAX_QUOTA_MESSAGE_AGE
from node.state.context import MessageContext

B = TypeVar("B", bound=Message)


@dataclass(frozen=True)
class MessageKind(Generic[B]):
    """One registry entry. `check` and `handler` take the same body type (mypy checks each entry)."""

    message_type: pb.MessageType.ValueType
    # The `MessageData.body` oneof field that carries it, and that field's message class.
    body: str
    body_type: type[B]
    # Stateless validation of the body: shape, sizes, enums (raises MessageRejected).
    check: Callable[[B], None]
    # Applies the body to state (raises MessageRejected; the caller rolls back).
    handler: Callable[[MessageContext, B], None]
    # Weakest delegated-key scope allowed to sign it; None: authorized by a custody signature instead.
    scope: int | None
    # Quota class: True when it adds an element that counts against storage quota, or removes (tombstones) one.
    # The stale-timestamp rule follows it (`max_age`); node/state/registry.py lists the class.
    quota: bool = False

    @property
    def name(self) -> str:
        return pb.MessageType.Name(self.message_type).removeprefix("MESSAGE_TYPE_")

    @property
    def max_age(self) -> int | None:
        """Stale-timestamp rule: how many seconds behind the block time it may be; None: no bound."""
        return MAX_QUOTA_MESSAGE_AGE if self.quota else None


def _project_fields() -> dict[str, str]:
    """Body field -> the field of that body naming the project it acts on (`project_id`, else
    `target_project_id`), for the bodies that have one; read from the schema once, at import."""
    out = {}
    for body in pb.MessageData.DESCRIPTOR.oneofs_by_name["body"].fields:
        assert body.message_type is not None  # every body is a message
        names = body.message_type.fields_by_name
        field = next((f for f in ("project_id", "target_project_id") if f in names), None)
        if field is not None:
            out[body.name] = field
    return out


_PROJECT_FIELD = _project_fields()
_CREATES_PROJECT = frozenset({"project_create", "fork"})


def project_of(data: pb.MessageData, message_hash: bytes) -> bytes:
    """The project a message acts on ("" when none): activity index and AGENT key scoping."""
    body_name = data.WhichOneof("body")
    if body_name in _CREATES_PROJECT:
        return message_hash
    if body_name is None:
        return b""
    field = _PROJECT_FIELD.get(body_name)
    if field is None:
        return b""
    return bytes(getattr(getattr(data, body_name), field))
