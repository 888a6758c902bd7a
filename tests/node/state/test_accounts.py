"""Account family: ACCOUNT_DATA, SIGNER_ADD/REMOVE, KEYCHAIN_AUTHORIZE/REVOKE, VERIFICATION_ADD/REMOVE,
STORAGE_GRANT. One accepted case with its exact resulting state, then each rejection code."""

from __future__ import annotations

from pathlib import Path

import pytest

from chain.v1 import message_pb2 as pb
from chain.v1 import state_pb2
from node import constants as C
from node.errors import Reason
from node.sdk.keys import Ed25519Key, P256Key, Secp256k1Key, WebAuthnKey
from node.sdk.messages import MessageBuilder
from node.storage import schema
from tests.harness import Actor, Harness
from tests.node.state.helpers import (
    add_key,
    builder,
    created_id,
    edit,
    edit_body,
    p256_key,
    signer_add_window,
    verification_claim,
    webauthn_key,
)

OWNER = pb.KEY_SCOPE_OWNER
SIGNING = pb.KEY_SCOPE_SIGNING
AGENT = pb.KEY_SCOPE_AGENT


@pytest.fixture
def h(tmp_path: Path) -> Harness:
    return Harness(tmp_path / "chain")


def stamp(h: Harness, key: bytes) -> int | None:
    return h.state().stamp(key)


def authorize(h: Harness, actor: Actor, key: P256Key | WebAuthnKey | Secp256k1Key, **kw: bool | int) -> None:
    h.commit(actor.b.keychain_authorize(actor.wallet, actor.next_nonce(), key, **kw))  # type: ignore[arg-type]


# ---------------------------------------------------------------- ACCOUNT_DATA
def test_account_data_sets_every_field_with_lww_stamps(h: Harness) -> None:
    a = h.actor()
    ts = h.now
    values = {
        pb.ACCOUNT_FIELD_DISPLAY_NAME: "Alice",
        pb.ACCOUNT_FIELD_AVATAR: "https://img/a.png",
        pb.ACCOUNT_FIELD_BIO: "b" * C.MAX_TEXT_FIELD_LEN,
        pb.ACCOUNT_FIELD_WEBSITE: "https://alice.dev",
    }
    out = h.commit(*(a.b.account_data(f, v) for f, v in values.items()))
    account = h.account(a.address)
    assert (account.display_name, account.avatar, account.bio, account.website) == tuple(values.values())
    # nothing else moved
    assert (account.custody_nonce, account.key_count, account.storage_units, account.project_count) == (1, 1, 1, 0)
    for f in values:
        assert stamp(h, schema.lww_stamp_key(schema.LwwEntity.ACCOUNT, a.address, f)) == ts
    # the account's activity index lists each message under its event id
    st = h.state()
    for record in out.applied:
        assert st.kv.get(schema.account_activity_key(a.address, record.event_id)) == record.message.hash
        assert st.message_seen(record.message.hash)


def test_account_data_lww_newer_wins_older_is_stale_tie_goes_to_inclusion_order(h: Harness) -> None:
    a = h.actor()
    t = h.now
    name = pb.ACCOUNT_FIELD_DISPLAY_NAME
    h.commit(a.b.account_data(name, "new", timestamp=t + 5))
    err = h.reject(a.b.account_data(name, "old", timestamp=t + 4), Reason.STALE_UPDATE)
    assert err.values == {"current": t + 5, "got": t + 4}
    # same timestamp: accepted, the later one in the block wins
    h.commit(a.b.account_data(name, "tie-1", timestamp=t + 5), a.b.account_data(name, "tie-2", timestamp=t + 5))
    assert h.account(a.address).display_name == "tie-2"
    # another field has its own register
    h.commit(a.b.account_data(pb.ACCOUNT_FIELD_BIO, "bio", timestamp=t))
    assert h.account(a.address).bio == "bio"
    assert stamp(h, schema.lww_stamp_key(schema.LwwEntity.ACCOUNT, a.address, name)) == t + 5


@pytest.mark.parametrize(
    ("field", "value", "bad"),
    [
        (0, "x", "field"),
        (5, "x", "field"),
        (pb.ACCOUNT_FIELD_BIO, "x" * (C.MAX_TEXT_FIELD_LEN + 1), "value"),
    ],
)
def test_account_data_invalid_field(h: Harness, field: int, value: str, bad: str) -> None:
    a = h.actor()
    msg = edit_body(a.b.account_data(pb.ACCOUNT_FIELD_BIO, "ok"), a.key, field=field, value=value)
    assert h.reject(msg, Reason.INVALID_FIELD).values["field"] == bad


def test_account_data_unknown_signer(h: Harness) -> None:
    a = h.actor()
    other = h.actor()
    h.reject(
        builder(h, a.address, Ed25519Key.generate()).account_data(pb.ACCOUNT_FIELD_DISPLAY_NAME, "x"),
        Reason.UNKNOWN_SIGNER,
    )
    # a key registered for another account does not sign for this one
    h.reject(builder(h, a.address, other.key).account_data(pb.ACCOUNT_FIELD_DISPLAY_NAME, "x"), Reason.UNKNOWN_SIGNER)


def test_account_data_insufficient_scope_for_agent_key(h: Harness) -> None:
    a = h.actor()
    agent = add_key(h, a, AGENT)
    err = h.reject(agent.account_data(pb.ACCOUNT_FIELD_DISPLAY_NAME, "x"), Reason.INSUFFICIENT_SCOPE)
    assert err.values == {"required": SIGNING, "got": AGENT}
    signing = add_key(h, a, SIGNING)
    h.commit(signing.account_data(pb.ACCOUNT_FIELD_DISPLAY_NAME, "by signing key"))


# ---------------------------------------------------------------- SIGNER_ADD
def test_signer_add_bootstraps_a_new_account(h: Harness) -> None:
    a = h.actor(units=0, register=False)
    assert h.state().account(a.address) is None
    ts = h.now
    h.commit(a.b.signer_add(a.wallet, a.next_nonce()))
    entry = h.state().signer(a.address, a.key.public_key)
    assert entry == state_pb2.KeyEntry(
        owner_address=a.address, key=a.key.public_key, scope=OWNER, added_at=ts, authorized_by=a.address
    )
    account = h.account(a.address)
    assert account == state_pb2.Account(owner_address=a.address, custody_nonce=1, key_count=1)


def test_signer_add_more_keys_with_scopes_and_allowed_projects(h: Harness) -> None:
    a = h.actor()
    k_signing, k_agent = Ed25519Key.generate(), Ed25519Key.generate()
    pid = created_id(h.commit(a.b.project_create("p")))
    h.commit(
        a.b.signer_add(a.wallet, a.next_nonce(), key=k_signing, scope=SIGNING),
        a.b.signer_add(a.wallet, a.next_nonce(), key=k_agent, scope=AGENT, allowed_projects=[pid]),
    )
    st = h.state()
    signing = st.signer(a.address, k_signing.public_key)
    agent = st.signer(a.address, k_agent.public_key)
    assert signing is not None and agent is not None
    assert (signing.scope, list(signing.allowed_projects)) == (SIGNING, [])
    assert (agent.scope, list(agent.allowed_projects)) == (AGENT, [pid])
    account = h.account(a.address)
    assert (account.key_count, account.custody_nonce) == (3, 3)


def _signer_add_edit(h: Harness, a: Actor, **fields: object) -> pb.Message:
    key = Ed25519Key.generate()
    msg = a.b.signer_add(a.wallet, a.custody_nonce, key=key, scope=SIGNING)
    return edit_body(msg, key, **fields)


@pytest.mark.parametrize(
    ("fields", "bad"),
    [
        ({"key": b"\x01" * 31}, "key"),
        ({"scope": 0}, "scope"),
        ({"scope": 4}, "scope"),
        ({"allowed_projects": [b"\x01" * 32]}, "allowed_projects"),  # only AGENT keys are restricted
        ({"scope": AGENT, "allowed_projects": [b"\x01" * 31]}, "allowed_projects[0]"),
        ({"scope": AGENT, "allowed_projects": [b"\x01" * 32, b"\x01" * 32]}, "allowed_projects"),
        (
            {"scope": AGENT, "allowed_projects": [i.to_bytes(32, "big") for i in range(C.MAX_ALLOWED_PROJECTS + 1)]},
            "allowed_projects",
        ),
    ],
)
def test_signer_add_invalid_field(h: Harness, fields: dict[str, object], bad: str) -> None:
    a = h.actor()
    assert h.reject(_signer_add_edit(h, a, **fields), Reason.INVALID_FIELD).values["field"] == bad


def test_signer_add_invalid_custody_auth_shape(h: Harness) -> None:
    a = h.actor()
    key = Ed25519Key.generate()
    msg = a.b.signer_add(a.wallet, a.custody_nonce, key=key, scope=SIGNING)

    def no_signature(data: pb.MessageData) -> None:
        data.signer_add.auth.signature.signature = b""

    def bad_type(data: pb.MessageData) -> None:
        data.signer_add.auth.signature.signature_type = 4

    def no_auth(data: pb.MessageData) -> None:
        data.signer_add.ClearField("auth")

    assert h.reject(edit(msg, key, no_signature), Reason.INVALID_FIELD).values["field"] == "auth.signature.signature"
    err = h.reject(edit(msg, key, bad_type), Reason.INVALID_FIELD)
    assert err.values["field"] == "auth.signature.signature_type"
    h.reject(edit(msg, key, no_auth), Reason.INVALID_FIELD)


def test_signer_add_must_be_signed_by_the_key_it_adds(h: Harness) -> None:
    a = h.actor()
    key = Ed25519Key.generate()
    msg = a.b.signer_add(a.wallet, a.custody_nonce, key=key, scope=SIGNING)
    err = h.reject(edit(msg, a.key, lambda d: None), Reason.INVALID_FIELD)
    assert err.values["field"] == "signer"


def test_signer_add_nonce_mismatch_and_failed_add_does_not_consume_the_nonce(h: Harness) -> None:
    a = h.actor()
    assert h.account(a.address).custody_nonce == 1
    err = h.reject(a.b.signer_add(a.wallet, 5, key=Ed25519Key.generate()), Reason.NONCE_MISMATCH)
    assert err.values == {"expected": 1, "got": 5}
    h.reject(a.b.signer_add(a.wallet, 0, key=Ed25519Key.generate()), Reason.NONCE_MISMATCH)  # already used
    # ALREADY_EXISTS after the custody check: the nonce stays unconsumed
    h.reject(a.b.signer_add(a.wallet, 1), Reason.ALREADY_EXISTS)
    assert h.account(a.address).custody_nonce == 1
    h.commit(a.b.signer_add(a.wallet, 1, key=Ed25519Key.generate()))
    assert h.account(a.address).custody_nonce == 2


@pytest.mark.parametrize(
    ("valid_after", "deadline", "reason"),
    [
        (-10, -10 + C.MAX_CUSTODY_VALIDITY_WINDOW + 1, Reason.AUTH_WINDOW_INVALID),
        (-10, -10, Reason.AUTH_WINDOW_INVALID),
        (10, 5, Reason.AUTH_WINDOW_INVALID),
        (1, 100, Reason.AUTH_NOT_YET_VALID),
        (-100, -1, Reason.AUTH_EXPIRED),
        # boundaries that are accepted
        (-10, -10 + C.MAX_CUSTODY_VALIDITY_WINDOW, None),
        (0, 100, None),
        (-100, 0, None),
    ],
)
def test_signer_add_custody_validity_window(h: Harness, valid_after: int, deadline: int, reason: Reason | None) -> None:
    a = h.actor()
    now = h.now  # the block the message lands in has this time
    msg = signer_add_window(
        a, a.wallet, a.custody_nonce, timestamp=now, valid_after=now + valid_after, deadline=now + deadline
    )
    if reason is None:
        h.commit(msg)
        assert h.account(a.address).key_count == 2
    else:
        h.reject(msg, reason)


def test_signer_add_custody_signature_invalid(h: Harness) -> None:
    a = h.actor()
    key = Ed25519Key.generate()
    msg = a.b.signer_add(a.wallet, a.custody_nonce, key=key, scope=SIGNING)

    def bad_v(data: pb.MessageData) -> None:
        sig = data.signer_add.auth.signature
        sig.signature = sig.signature[:64] + bytes([30])

    def with_public_key(data: pb.MessageData) -> None:  # secp256k1 carries no public key
        data.signer_add.auth.signature.public_key = a.wallet.public_key

    for change in (bad_v, with_public_key):
        err = h.reject(edit(msg, key, change), Reason.CUSTODY_SIGNATURE_INVALID)
        assert err.values["cause"] == "MALFORMED_SIGNATURE"


def test_signer_add_custody_signature_invalid_p256_and_webauthn(h: Harness) -> None:
    a = h.actor()
    p256 = p256_key()
    authorize(h, a, p256)
    # a P-256 signature over another digest does not verify
    key = Ed25519Key.generate()
    msg = a.b.signer_add(p256, a.custody_nonce, key=key, scope=SIGNING)
    other = a.b.signer_add(p256, a.custody_nonce, key=key, scope=AGENT)

    def swap_sig(data: pb.MessageData) -> None:
        data.signer_add.auth.signature.signature = other.data.signer_add.auth.signature.signature

    err = h.reject(edit(msg, key, swap_sig), Reason.CUSTODY_SIGNATURE_INVALID)
    assert err.values["cause"] == "INVALID_SIGNATURE"
    # passkeys for another relying party or used from a foreign origin
    for passkey, cause in (
        (webauthn_key(rp_id="example.com"), "WEBAUTHN_RP_ID"),  # origin is fine, rp id hash is not
        (webauthn_key(origin="https://evil.example"), "WEBAUTHN_ORIGIN"),
    ):
        err = h.reject(
            a.b.signer_add(passkey, a.custody_nonce, key=Ed25519Key.generate()), Reason.CUSTODY_SIGNATURE_INVALID
        )
        assert err.values["cause"] == cause


def test_signer_add_custody_key_unknown(h: Harness) -> None:
    a = h.actor()
    b = h.actor()
    # another wallet (secp256k1 recovers *its* address, which is not in a's keychain)
    err = h.reject(a.b.signer_add(b.wallet, a.custody_nonce, key=Ed25519Key.generate()), Reason.CUSTODY_KEY_UNKNOWN)
    assert err.values["key_id"] == b.address.hex()
    # a P-256 key and a passkey never authorized
    h.reject(a.b.signer_add(p256_key(), a.custody_nonce, key=Ed25519Key.generate()), Reason.CUSTODY_KEY_UNKNOWN)
    h.reject(a.b.signer_add(webauthn_key(), a.custody_nonce, key=Ed25519Key.generate()), Reason.CUSTODY_KEY_UNKNOWN)
    # the same P-256 private key used as a passkey (type 3) while authorized as type 2
    p256 = p256_key()
    authorize(h, a, p256)
    as_passkey = WebAuthnKey.from_private_bytes(p256.private_bytes(), rp_id="localhost", origin="http://localhost")
    assert as_passkey.address == p256.address
    h.reject(a.b.signer_add(as_passkey, a.custody_nonce, key=Ed25519Key.generate()), Reason.CUSTODY_KEY_UNKNOWN)


def test_signer_add_custody_key_revoked_and_expired(h: Harness) -> None:
    a = h.actor()
    revoked, expiring = p256_key(), webauthn_key()
    authorize(h, a, revoked)
    expires_at = h.now + 100
    authorize(h, a, expiring, expires_at=expires_at)
    h.commit(a.b.keychain_revoke(a.wallet, a.next_nonce(), revoked.address))
    h.reject(a.b.signer_add(revoked, a.custody_nonce, key=Ed25519Key.generate()), Reason.CUSTODY_KEY_REVOKED)
    # usable until expires_at, not at it
    h.now = expires_at - 1
    h.commit(a.b.signer_add(expiring, a.next_nonce(), key=Ed25519Key.generate()))
    assert h.now == expires_at
    err = h.reject(a.b.signer_add(expiring, a.custody_nonce, key=Ed25519Key.generate()), Reason.CUSTODY_KEY_EXPIRED)
    assert err.values["key_id"] == expiring.address.hex()


def test_signer_add_limit_exceeded(h: Harness) -> None:
    a = h.actor()
    keys = [Ed25519Key.generate() for _ in range(C.MAX_DELEGATED_KEYS - 1)]
    h.commit(*(a.b.signer_add(a.wallet, a.next_nonce(), key=k, scope=SIGNING) for k in keys))
    assert h.account(a.address).key_count == C.MAX_DELEGATED_KEYS
    err = h.reject(a.b.signer_add(a.wallet, a.custody_nonce, key=Ed25519Key.generate()), Reason.LIMIT_EXCEEDED)
    assert err.values["limit"] == C.MAX_DELEGATED_KEYS


# ---------------------------------------------------------------- all three custody signature types
def test_p256_and_webauthn_custody_keys_authorize_signer_add(h: Harness) -> None:
    a = h.actor()
    p256, passkey = p256_key(), webauthn_key()
    t1 = h.now
    authorize(h, a, p256)
    authorize(h, a, passkey, admin=True)
    st = h.state()
    assert st.custody_key(a.address, p256.address) == state_pb2.CustodyKey(
        key_id=p256.address,
        signature_type=2,
        public_key=p256.public_key,
        added_at=t1,
        status=state_pb2.CUSTODY_KEY_STATUS_ACTIVE,
    )
    row = st.custody_key(a.address, passkey.address)
    assert row is not None and (row.signature_type, row.admin, row.public_key) == (3, True, passkey.public_key)
    k2, k3 = Ed25519Key.generate(), Ed25519Key.generate()
    h.commit(a.b.signer_add(p256, a.next_nonce(), key=k2, scope=SIGNING))
    h.commit(a.b.signer_add(passkey, a.next_nonce(), key=k3, scope=AGENT))
    st = h.state()
    assert st.signer(a.address, k2.public_key).authorized_by == p256.address  # type: ignore[union-attr]
    assert st.signer(a.address, k3.public_key).authorized_by == passkey.address  # type: ignore[union-attr]
    account = h.account(a.address)
    assert (account.key_count, account.custody_key_count, account.custody_nonce) == (3, 2, 5)
    # the new keys sign messages
    h.commit(builder(h, a.address, k2).account_data(pb.ACCOUNT_FIELD_DISPLAY_NAME, "via p256-authorized key"))


def test_root_custody_key_can_be_p256_or_webauthn(h: Harness) -> None:
    for root in (p256_key(), webauthn_key()):
        key = Ed25519Key.generate()
        b = builder(h, root.address, key)
        h.commit(b.signer_add(root, 0))
        entry = h.state().signer(root.address, key.public_key)
        assert entry is not None and entry.authorized_by == root.address
        assert h.account(root.address).custody_nonce == 1


# ---------------------------------------------------------------- SIGNER_REMOVE
def test_signer_remove_deletes_the_key(h: Harness) -> None:
    a = h.actor()
    second = add_key(h, a, SIGNING)
    assert h.account(a.address).key_count == 2
    h.commit(a.b.signer_remove(a.wallet, a.next_nonce(), second.signer.public_key))
    assert h.state().signer(a.address, second.signer.public_key) is None
    account = h.account(a.address)
    assert (account.key_count, account.custody_nonce) == (1, 3)
    h.reject(second.account_data(pb.ACCOUNT_FIELD_DISPLAY_NAME, "removed key"), Reason.UNKNOWN_SIGNER)


def test_signer_remove_authorized_by_a_p256_custody_key(h: Harness) -> None:
    a = h.actor()
    p256 = p256_key()
    authorize(h, a, p256)
    h.commit(a.b.signer_remove(p256, a.next_nonce(), a.key.public_key))  # removes its own (only) key
    assert h.account(a.address).key_count == 0
    assert h.state().signer(a.address, a.key.public_key) is None


def test_signer_remove_rejections(h: Harness) -> None:
    a = h.actor()
    h.reject(a.b.signer_remove(a.wallet, a.custody_nonce, Ed25519Key.generate().public_key), Reason.NOT_PRESENT)
    h.reject(a.b.signer_remove(a.wallet, a.custody_nonce + 1, a.key.public_key), Reason.NONCE_MISMATCH)
    msg = a.b.signer_remove(a.wallet, a.custody_nonce, a.key.public_key)
    assert h.reject(edit_body(msg, a.key, key=b"\x00" * 31), Reason.INVALID_FIELD).values["field"] == "key"

    def no_signature(data: pb.MessageData) -> None:
        data.signer_remove.auth.signature.signature = b""

    h.reject(edit(msg, a.key, no_signature), Reason.INVALID_FIELD)
    h.reject(a.b.signer_remove(h.actor().wallet, a.custody_nonce, a.key.public_key), Reason.CUSTODY_KEY_UNKNOWN)
    assert h.account(a.address).key_count == 1


# ---------------------------------------------------------------- KEYCHAIN_AUTHORIZE
def test_keychain_authorize_each_key_type(h: Harness) -> None:
    a = h.actor()
    secp, p256, passkey = Secp256k1Key.generate(), p256_key(), webauthn_key()
    t = h.now
    h.commit(
        a.b.keychain_authorize(a.wallet, a.next_nonce(), secp, admin=True),
        a.b.keychain_authorize(a.wallet, a.next_nonce(), p256, expires_at=t + 1000),
        a.b.keychain_authorize(a.wallet, a.next_nonce(), passkey),
    )
    st = h.state()
    assert st.custody_key(a.address, secp.address) == state_pb2.CustodyKey(
        key_id=secp.address, signature_type=1, admin=True, added_at=t, status=state_pb2.CUSTODY_KEY_STATUS_ACTIVE
    )
    assert st.custody_key(a.address, p256.address) == state_pb2.CustodyKey(
        key_id=p256.address,
        signature_type=2,
        public_key=p256.public_key,
        expires_at=t + 1000,
        added_at=t,
        status=state_pb2.CUSTODY_KEY_STATUS_ACTIVE,
    )
    row = st.custody_key(a.address, passkey.address)
    assert row is not None and row.signature_type == 3
    account = h.account(a.address)
    assert (account.custody_key_count, account.custody_nonce) == (3, 4)
    # an admin (non-root) key manages the keychain
    another = p256_key()
    h.commit(a.b.keychain_authorize(secp, a.next_nonce(), another))
    assert h.account(a.address).custody_key_count == 4


def test_keychain_authorize_by_webauthn_admin(h: Harness) -> None:
    a = h.actor()
    passkey = webauthn_key()
    authorize(h, a, passkey, admin=True)
    p256 = p256_key()
    h.commit(a.b.keychain_authorize(passkey, a.next_nonce(), p256))
    assert h.state().custody_key(a.address, p256.address) is not None


def _authorize_edit(a: Actor, **fields: object) -> pb.Message:
    msg = a.b.keychain_authorize(a.wallet, a.custody_nonce, p256_key())
    return edit_body(msg, a.key, **fields)


@pytest.mark.parametrize(
    ("fields", "bad"),
    [
        ({"key_id": b"\x01" * 19}, "key_id"),
        ({"signature_type": 0}, "signature_type"),
        ({"signature_type": 4}, "signature_type"),
        ({"public_key": b""}, "public_key"),  # P-256 needs its public key
        ({"public_key": b"\x01" * 63}, "public_key"),
        ({"admin": True, "expires_at": 2_000_000_000}, "expires_at"),
        ({"public_key": P256Key.generate().public_key}, "key_id"),  # not the key's address
        ({"public_key": b"\x01" * 64}, "public_key"),  # not on the curve
        ({"expires_at": 1}, "expires_at"),  # in the past
    ],
)
def test_keychain_authorize_invalid_field(h: Harness, fields: dict[str, object], bad: str) -> None:
    a = h.actor()
    assert h.reject(_authorize_edit(a, **fields), Reason.INVALID_FIELD).values["field"] == bad


def test_keychain_authorize_invalid_field_root_key_and_expiry_now(h: Harness) -> None:
    a = h.actor()
    err = h.reject(a.b.keychain_authorize(a.wallet, a.custody_nonce, a.wallet), Reason.INVALID_FIELD)
    assert err.values["field"] == "key_id"
    err = h.reject(
        a.b.keychain_authorize(a.wallet, a.custody_nonce, p256_key(), expires_at=h.now), Reason.INVALID_FIELD
    )
    assert err.values["field"] == "expires_at"


def test_keychain_authorize_rejections(h: Harness) -> None:
    a = h.actor()
    non_admin, revoked = p256_key(), webauthn_key()
    authorize(h, a, non_admin)
    authorize(h, a, revoked)
    h.commit(a.b.keychain_revoke(a.wallet, a.next_nonce(), revoked.address))
    h.reject(a.b.keychain_authorize(a.wallet, a.custody_nonce, non_admin), Reason.ALREADY_EXISTS)
    h.reject(a.b.keychain_authorize(a.wallet, a.custody_nonce, revoked), Reason.CUSTODY_KEY_REVOKED)
    err = h.reject(a.b.keychain_authorize(non_admin, a.custody_nonce, p256_key()), Reason.CUSTODY_KEY_NOT_ADMIN)
    assert err.values["key_id"] == non_admin.address.hex()
    h.reject(a.b.keychain_authorize(a.wallet, a.custody_nonce - 1, p256_key()), Reason.NONCE_MISMATCH)
    h.reject(a.b.keychain_authorize(h.actor().wallet, a.custody_nonce, p256_key()), Reason.CUSTODY_KEY_UNKNOWN)


def test_keychain_authorize_limit_exceeded(h: Harness) -> None:
    a = h.actor()
    keys = [Secp256k1Key.generate() for _ in range(C.MAX_CUSTODY_KEYS)]
    h.commit(*(a.b.keychain_authorize(a.wallet, a.next_nonce(), k) for k in keys))
    assert h.account(a.address).custody_key_count == C.MAX_CUSTODY_KEYS
    h.reject(a.b.keychain_authorize(a.wallet, a.custody_nonce, p256_key()), Reason.LIMIT_EXCEEDED)


# ---------------------------------------------------------------- KEYCHAIN_REVOKE
def test_keychain_revoke_keeps_the_row_as_revoked(h: Harness) -> None:
    a = h.actor()
    p256 = p256_key()
    authorize(h, a, p256)
    t = h.now
    h.commit(a.b.keychain_revoke(a.wallet, a.next_nonce(), p256.address))
    row = h.state().custody_key(a.address, p256.address)
    assert row is not None
    assert (row.status, row.revoked_at, row.public_key) == (state_pb2.CUSTODY_KEY_STATUS_REVOKED, t, p256.public_key)
    account = h.account(a.address)
    assert (account.custody_key_count, account.custody_nonce) == (0, 3)


def test_keychain_revoke_by_admin_custody_key(h: Harness) -> None:
    a = h.actor()
    admin, victim = webauthn_key(), p256_key()
    authorize(h, a, admin, admin=True)
    authorize(h, a, victim)
    h.commit(a.b.keychain_revoke(admin, a.next_nonce(), victim.address))
    row = h.state().custody_key(a.address, victim.address)
    assert row is not None and row.status == state_pb2.CUSTODY_KEY_STATUS_REVOKED
    # an admin may revoke itself; it then signs nothing
    h.commit(a.b.keychain_revoke(admin, a.next_nonce(), admin.address))
    h.reject(a.b.keychain_authorize(admin, a.custody_nonce, p256_key()), Reason.CUSTODY_KEY_REVOKED)


def test_keychain_revoke_rejections(h: Harness) -> None:
    a = h.actor()
    non_admin, other = p256_key(), p256_key()
    authorize(h, a, non_admin)
    authorize(h, a, other)
    err = h.reject(a.b.keychain_revoke(a.wallet, a.custody_nonce, a.address), Reason.INVALID_FIELD)
    assert err.values["field"] == "key_id"
    msg = a.b.keychain_revoke(a.wallet, a.custody_nonce, other.address)
    assert h.reject(edit_body(msg, a.key, key_id=b"\x01" * 21), Reason.INVALID_FIELD).values["field"] == "key_id"
    h.reject(a.b.keychain_revoke(a.wallet, a.custody_nonce, p256_key().address), Reason.CUSTODY_KEY_UNKNOWN)
    h.reject(a.b.keychain_revoke(non_admin, a.custody_nonce, other.address), Reason.CUSTODY_KEY_NOT_ADMIN)
    h.reject(a.b.keychain_revoke(a.wallet, a.custody_nonce + 3, other.address), Reason.NONCE_MISMATCH)
    h.commit(a.b.keychain_revoke(a.wallet, a.next_nonce(), other.address))
    h.reject(a.b.keychain_revoke(a.wallet, a.custody_nonce, other.address), Reason.CUSTODY_KEY_REVOKED)


# ---------------------------------------------------------------- VERIFICATION_ADD / REMOVE
def test_verification_add_and_remove(h: Harness) -> None:
    a = h.actor()
    ext = Secp256k1Key.generate()
    t = h.now
    msg = a.b.verification_add(ext)
    h.commit(msg)
    key = schema.verification_key(a.address, ext.address)
    assert h.state().load(state_pb2.Verification, key) == state_pb2.Verification(
        owner_address=a.address,
        address=ext.address,
        added_at=t,
        claim_signature=msg.data.verification_add.claim_signature,
    )
    assert h.account(a.address).verification_count == 1
    # a newer add refreshes the claim without counting twice
    h.commit(a.b.verification_add(ext, timestamp=t + 3))
    record = h.state().load(state_pb2.Verification, key)
    assert record is not None and record.added_at == t + 3
    assert h.account(a.address).verification_count == 1
    h.commit(a.b.verification_remove(ext.address, timestamp=t + 5))
    assert h.state().load(state_pb2.Verification, key) is None
    assert stamp(h, schema.tombstone_key(key)) == t + 5
    assert h.account(a.address).verification_count == 0
    # re-adding after the tombstone clears it
    h.commit(a.b.verification_add(ext, timestamp=t + 6))
    assert stamp(h, schema.tombstone_key(key)) is None
    assert h.account(a.address).verification_count == 1


def test_verification_add_rejections(h: Harness) -> None:
    a = h.actor()
    ext, other = Secp256k1Key.generate(), Secp256k1Key.generate()
    t = h.now
    # claim signed by another wallet / garbage claim
    body = pb.VerificationAddBody(
        address=ext.address, claim_signature=verification_claim(a.address, ext, t, signer=other)
    )
    bad = a.b.build(pb.MESSAGE_TYPE_VERIFICATION_ADD, "verification_add", body, t)
    h.reject(bad, Reason.INVALID_SIGNATURE)
    garbage = edit_body(a.b.verification_add(ext), a.key, claim_signature=b"\x00" * 65)
    h.reject(garbage, Reason.INVALID_SIGNATURE)
    # claim for another owner
    stolen = edit_body(a.b.verification_add(ext), a.key, claim_signature=verification_claim(other.address, ext, h.now))
    h.reject(stolen, Reason.INVALID_SIGNATURE)
    # structure
    assert (
        h.reject(edit_body(a.b.verification_add(ext), a.key, address=b"\x01" * 19), Reason.INVALID_FIELD).values[
            "field"
        ]
        == "address"
    )
    err = h.reject(edit_body(a.b.verification_add(ext), a.key, claim_signature=b"\x01" * 64), Reason.INVALID_FIELD)
    assert err.values["field"] == "claim_signature"
    # stale / already / tombstoned
    h.reject(a.b.verification_add(ext, timestamp=h.now - C.MAX_QUOTA_MESSAGE_AGE - 1), Reason.STALE_TIMESTAMP)
    t_add = h.now
    h.commit(a.b.verification_add(ext))
    h.reject(a.b.verification_add(ext, timestamp=t_add - 1), Reason.ALREADY_EXISTS)
    h.commit(a.b.verification_remove(ext.address, timestamp=t_add + 10))
    h.reject(a.b.verification_add(ext, timestamp=t_add + 10), Reason.TOMBSTONED)  # remove wins the tie
    h.reject(a.b.verification_add(ext, timestamp=t_add + 9), Reason.TOMBSTONED)


def test_verification_add_storage(h: Harness) -> None:
    poor = h.actor(units=0)
    h.reject(poor.b.verification_add(Secp256k1Key.generate()), Reason.NO_STORAGE)
    a = h.actor()
    wallets = [Secp256k1Key.generate() for _ in range(C.UNIT_VERIFICATIONS)]
    h.commit(*(a.b.verification_add(w) for w in wallets))
    assert h.account(a.address).verification_count == C.UNIT_VERIFICATIONS
    err = h.reject(a.b.verification_add(Secp256k1Key.generate()), Reason.QUOTA_EXCEEDED)
    assert err.values == {"what": "verifications", "limit": 50, "count": 50}


def test_verification_remove_rejections(h: Harness) -> None:
    a = h.actor()
    ext = Secp256k1Key.generate()
    key = schema.verification_key(a.address, ext.address)
    # never added: rejected, and no tombstone is left
    h.reject(a.b.verification_remove(ext.address), Reason.NOT_PRESENT)
    assert stamp(h, schema.tombstone_key(key)) is None
    t = h.now
    h.commit(a.b.verification_add(ext))
    h.reject(a.b.verification_remove(ext.address, timestamp=t - 1), Reason.STALE_UPDATE)
    msg = a.b.verification_remove(ext.address)
    assert h.reject(edit_body(msg, a.key, address=b""), Reason.INVALID_FIELD).values["field"] == "address"
    h.reject(add_key(h, a, AGENT).verification_remove(ext.address), Reason.INSUFFICIENT_SCOPE)
    # remove at the add's own timestamp wins
    h.commit(a.b.verification_remove(ext.address, timestamp=t))
    assert h.account(a.address).verification_count == 0
    # removing it again only moves the tombstone later (removes commute); an older remove loses
    h.commit(a.b.verification_remove(ext.address, timestamp=t + 50))
    assert stamp(h, schema.tombstone_key(key)) == t + 50
    assert h.account(a.address).verification_count == 0
    h.reject(a.b.verification_remove(ext.address, timestamp=t + 40), Reason.STALE_UPDATE)


# ---------------------------------------------------------------- STORAGE_GRANT
def test_storage_grant_records_and_index(h: Harness) -> None:
    a = h.actor(units=0)
    t = h.now
    out = h.commit(h.authority.b.storage_grant(a.address, 3))
    gid = created_id(out)
    st = h.state()
    assert st.grant(a.address, gid) == state_pb2.StorageGrant(
        grant_id=gid,
        owner_address=a.address,
        units=3,
        granted_at=t,
        expires_at=t + C.STORAGE_GRANT_DURATION,
        authority_address=h.authority.address,
    )
    assert list(st.grant_index(a.address).grant_ids) == [gid]
    assert h.account(a.address).storage_units == 3
    out = h.commit(h.authority.b.storage_grant(a.address, 2))
    assert list(h.state().grant_index(a.address).grant_ids) == [gid, created_id(out)]
    assert h.account(a.address).storage_units == 5
    # 5 units buy 50 projects
    assert h.state().active_units(a.address, h.now) == 5


def test_storage_grant_expiry_prunes_and_removes_quota(h: Harness) -> None:
    a = h.actor(units=1)
    (gid,) = h.state().grant_index(a.address).grant_ids
    grant = h.state().grant(a.address, gid)
    assert grant is not None
    h.now = int(grant.expires_at)  # a grant is active while expires_at > now
    h.reject(a.b.project_create("late"), Reason.NO_STORAGE)
    out = h.commit(h.authority.b.storage_grant(a.address, 2))
    st = h.state()
    assert list(st.grant_index(a.address).grant_ids) == [created_id(out)]
    assert st.grant(a.address, gid) is None  # the expired grant was pruned
    assert h.account(a.address).storage_units == 2
    h.commit(a.b.project_create("late"))


def test_storage_grant_rejections(h: Harness) -> None:
    a = h.actor()
    err = h.reject(a.b.storage_grant(a.address, 1), Reason.NOT_STORAGE_AUTHORITY)
    assert "storage authority" in err.detail
    auth = h.authority
    for units in (0, C.MAX_GRANT_UNITS + 1):
        assert h.reject(auth.b.storage_grant(a.address, units), Reason.INVALID_FIELD).values["field"] == "units"
    err = h.reject(
        edit_body(auth.b.storage_grant(a.address, 1), auth.key, recipient_address=b"\x01" * 32), Reason.INVALID_FIELD
    )
    assert err.values["field"] == "recipient_address"
    h.reject(auth.b.storage_grant(a.address, 1, timestamp=h.now - C.MAX_QUOTA_MESSAGE_AGE - 1), Reason.STALE_TIMESTAMP)
    h.reject(add_key(h, auth, AGENT).storage_grant(a.address, 1), Reason.INSUFFICIENT_SCOPE)


def test_storage_grant_limit_exceeded(h: Harness) -> None:
    a = h.actor(units=0)
    h.commit(*(h.authority.b.storage_grant(a.address, u) for u in range(1, C.MAX_ACTIVE_GRANTS + 1)))
    assert len(h.state().grant_index(a.address).grant_ids) == C.MAX_ACTIVE_GRANTS
    assert h.account(a.address).storage_units == sum(range(1, C.MAX_ACTIVE_GRANTS + 1))
    h.reject(h.authority.b.storage_grant(a.address, 7), Reason.LIMIT_EXCEEDED)


# ---------------------------------------------------------------- shared custody checks, every custody message
CUSTODY_KINDS = ["signer_add", "signer_remove", "keychain_authorize", "keychain_revoke"]


def _custody_message(h: Harness, a: Actor, kind: str, custody: object, clock: int, victim: P256Key) -> pb.Message:
    """A custody-authorized message of `kind`, its validity window [clock - 60, clock + 540], stamped now."""
    b = MessageBuilder(a.address, a.key, clock=lambda: float(clock))
    nonce, now = a.custody_nonce, h.now
    if kind == "signer_add":
        return b.signer_add(custody, nonce, key=Ed25519Key.generate(), scope=SIGNING, timestamp=now)  # type: ignore[arg-type]
    if kind == "signer_remove":
        return b.signer_remove(custody, nonce, a.key.public_key, timestamp=now)  # type: ignore[arg-type]
    if kind == "keychain_authorize":
        return b.keychain_authorize(custody, nonce, p256_key(), timestamp=now)  # type: ignore[arg-type]
    return b.keychain_revoke(custody, nonce, victim.address, timestamp=now)  # type: ignore[arg-type]


@pytest.mark.parametrize("kind", CUSTODY_KINDS)
def test_custody_checks_apply_to_every_custody_message(h: Harness, kind: str) -> None:
    a = h.actor()
    victim, revoked, stranger = p256_key(), p256_key(), p256_key()
    expiring = webauthn_key()
    authorize(h, a, victim)
    authorize(h, a, revoked, admin=True)
    expires_at = h.now + 50
    authorize(h, a, expiring, expires_at=expires_at)
    h.commit(a.b.keychain_revoke(a.wallet, a.next_nonce(), revoked.address))
    now = h.now
    cases: list[tuple[object, int, Reason]] = [
        (a.wallet, now + 61, Reason.AUTH_NOT_YET_VALID),  # valid_after = now + 1
        (a.wallet, now - 541, Reason.AUTH_EXPIRED),  # deadline = now - 1
        (revoked, now, Reason.CUSTODY_KEY_REVOKED),
        (stranger, now, Reason.CUSTODY_KEY_UNKNOWN),
    ]
    for custody, clock, reason in cases:
        h.reject(_custody_message(h, a, kind, custody, clock + (h.now - now), victim), reason)
    h.now = expires_at
    h.reject(_custody_message(h, a, kind, expiring, h.now, victim), Reason.CUSTODY_KEY_EXPIRED)
    # and the happy path for the same kind, authorized by the root wallet
    nonce = a.custody_nonce
    h.commit(_custody_message(h, a, kind, a.wallet, h.now, victim))
    assert h.account(a.address).custody_nonce == nonce + 1
