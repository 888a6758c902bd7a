"""Codes every message type shares: envelope (hash, data_bytes, signature), structure (type, network,
body, owner, timestamp), time window and duplicates; and how a block treats its dropped messages."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from chain.v1 import message_pb2 as pb
from node import constants as C
from node.errors import Reason
from node.sdk.keys import Ed25519Key
from node.sdk.messages import sign_message
from node.state.registry import DISABLED
from tests.harness import Harness, commit_meta
from tests.node.state.helpers import created_id, edit


@pytest.fixture
def h(tmp_path: Path) -> Harness:
    return Harness(tmp_path / "chain")


def setter(name: str, value: object) -> Callable[[pb.MessageData], None]:
    def change(data: pb.MessageData) -> None:
        setattr(data, name, value)

    return change


def copy(msg: pb.Message) -> pb.Message:
    out = pb.Message()
    out.CopyFrom(msg)
    return out


# ---------------------------------------------------------------- envelope
def test_hash_mismatch(h: Harness) -> None:
    a = h.actor()
    msg = copy(a.b.account_data(pb.ACCOUNT_FIELD_DISPLAY_NAME, "x"))
    msg.hash = bytes(32)
    h.reject(msg, Reason.HASH_MISMATCH)
    short = copy(a.b.account_data(pb.ACCOUNT_FIELD_DISPLAY_NAME, "y"))
    short.hash = short.hash[:31]
    h.reject(short, Reason.HASH_MISMATCH)
    # data changed after signing: hash no longer matches
    changed = copy(a.b.account_data(pb.ACCOUNT_FIELD_DISPLAY_NAME, "z"))
    changed.data.account_data.value = "zz"
    changed.data_bytes = b""
    h.reject(changed, Reason.HASH_MISMATCH)


def test_data_bytes_mismatch(h: Harness) -> None:
    a = h.actor()
    msg = copy(a.b.account_data(pb.ACCOUNT_FIELD_DISPLAY_NAME, "x"))
    msg.data_bytes = msg.data_bytes + b"\x00"
    h.reject(msg, Reason.DATA_BYTES_MISMATCH)
    other = a.b.account_data(pb.ACCOUNT_FIELD_DISPLAY_NAME, "y")
    msg = copy(a.b.account_data(pb.ACCOUNT_FIELD_DISPLAY_NAME, "x"))
    msg.data_bytes = other.data_bytes
    h.reject(msg, Reason.DATA_BYTES_MISMATCH)
    # data_bytes is optional: without it the node encodes data itself
    ok = copy(a.b.account_data(pb.ACCOUNT_FIELD_DISPLAY_NAME, "w"))
    ok.data_bytes = b""
    h.commit(ok)
    assert h.account(a.address).display_name == "w"


def test_unknown_fields_are_malformed(h: Harness) -> None:
    a = h.actor()
    data = pb.MessageData()
    data.ParseFromString(
        a.b.account_data(pb.ACCOUNT_FIELD_DISPLAY_NAME, "x").data.SerializeToString() + b"\xc0\x0c\x01"
    )  # field 200 = 1
    msg = sign_message(data, a.key)
    h.reject(msg, Reason.DATA_BYTES_MISMATCH)  # data_bytes carries the unknown field, the canonical form does not
    msg.data_bytes = b""
    h.reject(msg, Reason.MALFORMED_MESSAGE)


def test_message_too_large(h: Harness) -> None:
    a = h.actor()
    commits = [commit_meta(i) for i in range(C.MAX_COMMITS_PER_BUNDLE)]
    for c in commits:
        c.title = "t" * C.MAX_TITLE_LEN
    h.reject(a.b.commit_bundle(bytes(32), commits), Reason.MESSAGE_TOO_LARGE)


def test_invalid_signature(h: Harness) -> None:
    a = h.actor()
    msg = copy(a.b.account_data(pb.ACCOUNT_FIELD_DISPLAY_NAME, "x"))
    msg.signature = bytes([msg.signature[0] ^ 1]) + msg.signature[1:]
    h.reject(msg, Reason.INVALID_SIGNATURE)
    # signed by another key while claiming a's key
    forged = copy(a.b.account_data(pb.ACCOUNT_FIELD_DISPLAY_NAME, "y"))
    forged.signature = Ed25519Key.generate().sign(forged.hash)
    h.reject(forged, Reason.INVALID_SIGNATURE)
    for field, value in (("signer", a.key.public_key[:31]), ("signature", msg.signature[:63])):
        bad = copy(a.b.account_data(pb.ACCOUNT_FIELD_DISPLAY_NAME, "z"))
        setattr(bad, field, value)
        h.reject(bad, Reason.INVALID_SIGNATURE)


# ---------------------------------------------------------------- structure
def test_wrong_network(h: Harness) -> None:
    a = h.actor()
    for network in (pb.NETWORK_MAINNET, pb.NETWORK_TESTNET, pb.NETWORK_UNSPECIFIED):
        msg = edit(a.b.account_data(pb.ACCOUNT_FIELD_DISPLAY_NAME, "x"), a.key, setter("network", network))
        err = h.reject(msg, Reason.WRONG_NETWORK)
        assert err.values == {"got": network}


@pytest.mark.parametrize(("number", "name"), sorted(DISABLED.items()))
def test_disabled_message_types(h: Harness, number: int, name: str) -> None:
    a = h.actor()
    msg = edit(a.b.account_data(pb.ACCOUNT_FIELD_DISPLAY_NAME, "x"), a.key, lambda d: setattr(d, "type", number))
    err = h.reject(msg, Reason.DISABLED_MESSAGE_TYPE)
    assert err.values == {"type": number}
    assert name in err.detail
    # any body, or none
    bare = edit(msg, a.key, lambda d: d.ClearField("account_data"))
    h.reject(bare, Reason.DISABLED_MESSAGE_TYPE)


@pytest.mark.parametrize("number", [0, 6, 99, 1000])
def test_unknown_message_types(h: Harness, number: int) -> None:
    a = h.actor()
    msg = edit(a.b.account_data(pb.ACCOUNT_FIELD_DISPLAY_NAME, "x"), a.key, lambda d: setattr(d, "type", number))
    assert h.reject(msg, Reason.UNKNOWN_MESSAGE_TYPE).values == {"type": number}


def test_body_mismatch(h: Harness) -> None:
    a = h.actor()
    # PROJECT_CREATE carrying an account_data body
    msg = edit(
        a.b.account_data(pb.ACCOUNT_FIELD_DISPLAY_NAME, "x"),
        a.key,
        lambda d: setattr(d, "type", pb.MESSAGE_TYPE_PROJECT_CREATE),
    )
    h.reject(msg, Reason.BODY_MISMATCH)
    # no body at all
    h.reject(
        edit(a.b.account_data(pb.ACCOUNT_FIELD_DISPLAY_NAME, "x"), a.key, lambda d: d.ClearField("account_data")),
        Reason.BODY_MISMATCH,
    )
    # a star carried as LINK_REMOVE's type with LINK_ADD's body
    star = a.b.follow(h.new_actor().address)
    h.reject(edit(star, a.key, lambda d: setattr(d, "type", pb.MESSAGE_TYPE_LINK_REMOVE)), Reason.BODY_MISMATCH)


def test_owner_and_timestamp_fields(h: Harness) -> None:
    a = h.actor()
    for owner in (b"", a.address[:19], a.address + b"\x00"):
        msg = edit(a.b.account_data(pb.ACCOUNT_FIELD_DISPLAY_NAME, "x"), a.key, setter("owner_address", owner))
        assert h.reject(msg, Reason.INVALID_FIELD).values["field"] == "owner_address"
    msg = edit(a.b.account_data(pb.ACCOUNT_FIELD_DISPLAY_NAME, "x"), a.key, lambda d: setattr(d, "timestamp", 0))
    assert h.reject(msg, Reason.INVALID_FIELD).values["field"] == "timestamp"


# ---------------------------------------------------------------- time
def test_future_timestamp(h: Harness) -> None:
    a = h.actor()
    now = h.now
    err = h.reject(
        a.b.account_data(pb.ACCOUNT_FIELD_DISPLAY_NAME, "x", timestamp=now + C.MAX_FUTURE_DRIFT + 1),
        Reason.FUTURE_TIMESTAMP,
    )
    assert err.values == {"timestamp": now + C.MAX_FUTURE_DRIFT + 1, "now": now}
    h.commit(a.b.account_data(pb.ACCOUNT_FIELD_DISPLAY_NAME, "edge", timestamp=h.now + C.MAX_FUTURE_DRIFT))
    # custody-authorized messages too
    h.reject(
        a.b.signer_add(a.wallet, a.custody_nonce, key=Ed25519Key.generate(), timestamp=h.now + 301),
        Reason.FUTURE_TIMESTAMP,
    )


def test_stale_timestamp_only_for_quota_messages(h: Harness) -> None:
    a = h.actor()
    now = h.now
    err = h.reject(a.b.project_create("p", timestamp=now - C.MAX_QUOTA_MESSAGE_AGE - 1), Reason.STALE_TIMESTAMP)
    assert err.values == {"timestamp": now - C.MAX_QUOTA_MESSAGE_AGE - 1, "now": now}
    # a non-quota message may be old (LWW decides)
    h.commit(a.b.account_data(pb.ACCOUNT_FIELD_DISPLAY_NAME, "old", timestamp=h.now - 10 * C.MAX_QUOTA_MESSAGE_AGE))
    assert h.account(a.address).display_name == "old"


# ---------------------------------------------------------------- duplicates and block behaviour
def test_duplicate_message_across_and_within_blocks(h: Harness) -> None:
    a = h.actor()
    msg = a.b.account_data(pb.ACCOUNT_FIELD_DISPLAY_NAME, "x")
    h.commit(msg)
    err = h.reject(msg, Reason.DUPLICATE_MESSAGE)
    assert err.values == {"hash": msg.hash.hex()}
    twice = a.b.account_data(pb.ACCOUNT_FIELD_DISPLAY_NAME, "y")
    out = h.build(twice, twice)
    assert len(out.applied) == 1
    assert [d.error.reason for d in out.dropped] == [Reason.DUPLICATE_MESSAGE]
    # a dropped message may come back later (it was never recorded)
    bad = a.b.project_create("p", timestamp=h.now + C.MAX_FUTURE_DRIFT + 1)
    h.reject(bad, Reason.FUTURE_TIMESTAMP)
    h.now += 2
    h.commit(bad)


def test_dropped_messages_do_not_halt_the_block(h: Harness) -> None:
    a = h.actor()
    good1 = a.b.project_create("one")
    bad = a.b.project_create("ONE", description="dup")
    good2 = a.b.account_data(pb.ACCOUNT_FIELD_DISPLAY_NAME, "x")
    first_event = h.state().stats().total_messages + 1
    out = h.build(good1, bad, good2)
    assert [r.message.hash for r in out.applied] == [good1.hash, good2.hash]
    assert [(r.index, r.event_id) for r in out.applied] == [(0, first_event), (1, first_event + 1)]
    assert [(d.hash, d.error.reason) for d in out.dropped] == [(bad.hash, Reason.NAME_TAKEN)]
    assert out.block.header.message_count == 2
    assert h.state().stats().total_messages == first_event + 1
    pid = created_id(out)
    assert h.project(pid).name == "one"
