"""The read path's compiled encoders (`shapes.to_json`, compiled per message type at import) and its orjson
serialisation equal the rule-by-rule definition (`shapes.reference_json` through `json.dumps`):

- on every message type the encoders cover, with every field set (non-UTF-8 ref names, enum numbers this
  build does not know, 64-bit values past 2^53, oneof members set and unset) and with none set;
- on the account summary (the account GET's shape), its lists empty and filled;
- on what a real node answers for a populated account (a real `chain-gateway` in front of it): the
  gateway's JSON equals the reference shape built from the node's own answer.
"""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
import requests
from google.protobuf import message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

from chain.v1 import block_pb2, node_info_pb2, proof_pb2, rpc_pb2, state_pb2
from chain.v1 import message_pb2 as pb
from gateway.rest import shapes
from gateway.rest.table import json_body
from tests.fixtures.actors import new_account
from tests.fixtures.gwproc import GatewayProcess
from tests.fixtures.nodeproc import NodeProcess

FD = FieldDescriptor


def _scalar(field: FieldDescriptor, i: int) -> Any:
    t = field.type
    if t == FD.TYPE_BYTES:
        return bytes([0xFF, 0x00, i % 256, 0x80])
    if t == FD.TYPE_STRING:
        return f"é-{field.name}-{i}"
    if t == FD.TYPE_BOOL:
        return True
    if t in (FD.TYPE_FLOAT, FD.TYPE_DOUBLE):
        return 1.5
    if t == FD.TYPE_ENUM:
        return 999 if i % 2 else field.enum_type.values[-1].number  # type: ignore[union-attr]
    if t in (FD.TYPE_UINT64, FD.TYPE_FIXED64):
        return 2**64 - 1 - i
    if t in (FD.TYPE_INT64, FD.TYPE_SINT64, FD.TYPE_SFIXED64):
        return -(2**62) - i
    if t in (FD.TYPE_UINT32, FD.TYPE_FIXED32):
        return 2**32 - 1 - i
    return -(2**30) - i


def populated(desc: Descriptor, depth: int = 0, skip_oneof: bool = False) -> Message:
    """A message with every field set (repeated fields: two items; of each oneof the first member, or none)."""
    msg = message_factory.GetMessageClass(desc)()
    for i, field in enumerate(shapes.fields(desc)):
        oneof = field.containing_oneof
        if oneof is not None and (skip_oneof or oneof.fields[0] is not field):
            continue
        if field.type == FD.TYPE_MESSAGE:
            if depth > 3:
                continue
            sub = populated(field.message_type, depth + 1, skip_oneof)  # type: ignore[arg-type]
            if field.is_repeated:
                getattr(msg, field.name).extend([sub, sub])
            else:
                getattr(msg, field.name).CopyFrom(sub)
        elif field.is_repeated:
            getattr(msg, field.name).extend([_scalar(field, i), _scalar(field, i + 1)])
        else:
            setattr(msg, field.name, _scalar(field, i))
    return msg


def _same_body(out: Any) -> None:
    body = json_body(orjson.dumps(out)).body  # what every handler's answer is made of (Call.json)
    assert isinstance(body, bytes)
    assert json.loads(body) == json.loads(json.dumps(out))


@pytest.mark.parametrize("skip_oneof", [False, True])
def test_compiled_encoders_equal_the_reference_on_every_type(skip_oneof: bool) -> None:
    files = (block_pb2, pb, node_info_pb2, proof_pb2, rpc_pb2, state_pb2)
    descs = shapes._all_messages(files)
    assert set(shapes.ENCODERS) == {n for n, d in descs.items() if not d.GetOptions().map_entry}
    compiled = 0
    for name, desc in sorted(descs.items()):
        if desc.GetOptions().map_entry:
            continue
        msg = populated(desc, skip_oneof=skip_oneof)
        expected = shapes.reference_json(msg)
        assert shapes.to_json(msg) == expected, name
        _same_body(shapes.to_json(msg))
        compiled += shapes.ENCODERS[name] is not shapes.reference_json
    assert compiled > 100  # the encoders are compiled, not the reference under another name


def test_compiled_encoders_equal_the_reference_on_empty_records() -> None:
    """Every field at its default: repeated fields empty (the encoders do not iterate them), unset
    sub-records encoded as their defaults, 0 for enums."""
    files = (block_pb2, pb, node_info_pb2, proof_pb2, rpc_pb2, state_pb2)
    for name, desc in sorted(shapes._all_messages(files).items()):
        if desc.GetOptions().map_entry:
            continue
        msg = message_factory.GetMessageClass(desc)()
        assert shapes.to_json(msg) == shapes.reference_json(msg), name


def _summary_reference(summary: rpc_pb2.GetAccountResponse) -> dict[str, Any]:
    expected = shapes.reference_json(summary.account)
    expected["storage_units"] = summary.storage_units
    for field in ("keys", "custody_keys", "verifications"):
        expected[field] = [shapes.reference_json(m) for m in getattr(summary, field)]
    return expected


@pytest.mark.parametrize("filled", [False, True])
def test_account_summary_equals_the_reference(filled: bool) -> None:
    """The account summary (the REST account GET) from the compiled encoders, with its lists empty and
    with two items each (`shapes.to_json_list` on both)."""
    summary = populated(rpc_pb2.GetAccountResponse.DESCRIPTOR) if filled else rpc_pb2.GetAccountResponse()
    assert isinstance(summary, rpc_pb2.GetAccountResponse)
    out = shapes.account_summary(summary)
    assert out == _summary_reference(summary)
    assert [len(out[f]) for f in ("keys", "custody_keys", "verifications")] == [2 if filled else 0] * 3
    assert shapes.to_json_list(summary.keys) == out["keys"]
    _same_body(out)


def test_gateway_json_equals_the_reference_for_a_real_account(node: NodeProcess, gateway: GatewayProcess) -> None:
    c = node.client()
    alice = new_account(c, node.authority())
    c.commit(alice.b.account_data(pb.ACCOUNT_FIELD_BIO, "encoder é \u2603"))
    owner = alice.address
    base = f"{gateway.url}/v1/accounts/0x{owner.hex()}"

    summary = c.stub.GetAccount(rpc_pb2.GetAccountRequest(owner_address=owner))
    assert len(summary.keys) == 1
    assert requests.get(base, timeout=10).json() == _summary_reference(summary)

    activity = c.stub.GetAccountActivity(rpc_pb2.GetAccountActivityRequest(owner_address=owner, page_size=50))
    assert len(activity.messages) >= 2
    answer = requests.get(base + "/activity?limit=50", timeout=10).json()
    assert answer["messages"] == [shapes.reference_json(m) for m in activity.messages]

    number = activity.messages[0].block_number
    block = c.stub.GetBlock(rpc_pb2.GetBlockRequest(block_number=number)).block
    answer = requests.get(f"{gateway.url}/v1/blocks/{number}", timeout=10).json()
    assert answer == shapes.reference_json(block)
