"""The message-type registry: every `MessageType` accounted for, each entry consistent with the proto,
and a missing entry a typed rejection rather than a KeyError."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from google.protobuf import descriptor_pb2

from chain.v1 import message_pb2 as pb
from node.constants import MAX_QUOTA_MESSAGE_AGE
from node.errors import InvariantBroken, MessageRejected, Reason
from node.state.kinds import MessageKind, project_of
from node.state.registry import DISABLED, KINDS, REGISTRY, Registry

BODY_FIELDS = {f.name: f for f in pb.MessageData.DESCRIPTOR.oneofs_by_name["body"].fields}


def _message_type_proto() -> descriptor_pb2.EnumDescriptorProto:
    file = descriptor_pb2.FileDescriptorProto.FromString(pb.DESCRIPTOR.serialized_pb)
    return next(e for e in file.enum_type if e.name == "MessageType")


def test_every_message_type_is_registered_or_disabled() -> None:
    assert REGISTRY.unaccounted() == []
    for name, number in pb.MessageType.items():
        if number == pb.MESSAGE_TYPE_UNSPECIFIED:
            assert number not in REGISTRY.kinds
            assert number not in REGISTRY.disabled
        else:
            assert (number in REGISTRY.kinds) != (number in REGISTRY.disabled), name


def test_disabled_types_are_the_protos_reserved_ones() -> None:
    enum = _message_type_proto()
    reserved = {n for r in enum.reserved_range for n in range(r.start, r.end + 1)}  # enum ranges are inclusive
    assert set(DISABLED) == reserved
    assert {f"MESSAGE_TYPE_{name}" for name in DISABLED.values()} == set(enum.reserved_name)
    assert not set(DISABLED) & set(pb.MessageType.values())


def test_every_body_field_belongs_to_exactly_one_type() -> None:
    bodies = [kind.body for kind in REGISTRY.kinds.values()]
    assert sorted(bodies) == sorted(BODY_FIELDS)


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.name)
def test_entry_is_consistent(kind: MessageKind[Any]) -> None:
    assert REGISTRY.kinds[kind.message_type] is kind
    assert f"MESSAGE_TYPE_{kind.name}" == pb.MessageType.Name(kind.message_type)
    body = kind.body_type.DESCRIPTOR
    assert body is not None
    # custody-authorized exactly when the body carries the custody authorization
    assert (kind.scope is None) == ("auth" in body.fields_by_name)
    assert BODY_FIELDS[kind.body].message_type is body
    assert kind.scope in (None, pb.KEY_SCOPE_SIGNING, pb.KEY_SCOPE_AGENT)
    assert kind.max_age == (MAX_QUOTA_MESSAGE_AGE if kind.quota else None)
    assert callable(kind.check)
    assert callable(kind.handler)


@pytest.mark.parametrize("lost", KINDS, ids=lambda k: k.name)
def test_a_lost_entry_is_caught_and_rejected_typed(lost: MessageKind[Any]) -> None:
    shrunk = Registry.of([k for k in KINDS if k is not lost], DISABLED)
    assert shrunk.unaccounted() == [pb.MessageType.Name(lost.message_type)]
    with pytest.raises(MessageRejected) as caught:
        shrunk.kind_of(lost.message_type)
    assert caught.value.reason is Reason.UNKNOWN_MESSAGE_TYPE
    assert caught.value.values == {"type": lost.message_type}


@pytest.mark.parametrize("number", sorted(DISABLED))
def test_disabled_type_is_a_typed_rejection(number: int) -> None:
    with pytest.raises(MessageRejected) as caught:
        REGISTRY.kind_of(number)
    assert caught.value.reason is Reason.DISABLED_MESSAGE_TYPE
    assert DISABLED[number] in caught.value.detail


@pytest.mark.parametrize("number", [pb.MESSAGE_TYPE_UNSPECIFIED, 6, 99, 2**31 - 1, -1])
def test_unknown_type_is_a_typed_rejection(number: int) -> None:
    with pytest.raises(MessageRejected) as caught:
        REGISTRY.kind_of(number)
    assert caught.value.reason is Reason.UNKNOWN_MESSAGE_TYPE


def test_registry_refuses_a_type_twice_or_both_registered_and_disabled() -> None:
    kind = KINDS[0]
    with pytest.raises(InvariantBroken, match="registered twice"):
        Registry.of([kind, kind], DISABLED)
    with pytest.raises(InvariantBroken, match="both registered and disabled"):
        Registry.of([kind], {kind.message_type: "X"})


def test_tables_are_immutable() -> None:
    with pytest.raises(TypeError):
        REGISTRY.kinds[999] = KINDS[0]  # type: ignore[index]
    with pytest.raises(TypeError):
        DISABLED[999] = "X"  # type: ignore[index]
    with pytest.raises(dataclasses.FrozenInstanceError):
        KINDS[0].quota = not KINDS[0].quota  # type: ignore[misc]
    assert isinstance(KINDS, tuple)


def _project_by_walk(data: pb.MessageData, message_hash: bytes) -> bytes:
    """The definition of `project_of`, field by field: a created project is the message's own hash; else the
    body's `project_id`, else its `target_project_id`, else none."""
    name = data.WhichOneof("body")
    if name is None:
        return b""
    if name in ("project_create", "fork"):
        return message_hash
    body = getattr(data, name)
    for field in ("project_id", "target_project_id"):
        if field in body.DESCRIPTOR.fields_by_name:
            return bytes(getattr(body, field))
    return b""


def test_project_of_equals_its_definition_for_every_body() -> None:
    message_hash = bytes(range(32))
    cases = [pb.MessageData()]
    for body in pb.MessageData.DESCRIPTOR.oneofs_by_name["body"].fields:
        data = pb.MessageData()
        sub = getattr(data, body.name)
        assert body.message_type is not None
        for i, field in enumerate(("project_id", "target_project_id", "source_project_id")):
            if field in body.message_type.fields_by_name:
                setattr(sub, field, bytes([i + 1]) * 32)
        sub.SetInParent()
        cases.append(data)
    assert len(cases) == len(pb.MessageData.DESCRIPTOR.oneofs_by_name["body"].fields) + 1
    for data in cases:
        assert project_of(data, message_hash) == _project_by_walk(data, message_hash), data.WhichOneof("body")
