"""Rejected cases: one fault each, with the reason code the state transition answers.

Every case is applied, in file order, to a fresh devnet chain (tests/harness.py with the fixed actors):
genesis registers only the storage authority (its Ed25519 key, scope OWNER; its custody nonce is 1).
Case `i` is the only message of block `i + 2`, whose time is `block_time`. Messages are by `carol`, an
account with no keys (custody nonce 0), unless the case says otherwise.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chain.v1 import message_pb2 as pb
from node.codec import blake3_256, encode_data
from node.crypto import ecdsa, eip712
from node.crypto.custody import CustodySignature
from node.errors import Reason
from node.sdk.messages import MessageBuilder, sign_message
from tests.conformance import fixed
from tests.conformance.fixed import h
from tests.conformance.gen_messages import vector
from tests.conformance.scenario import ConformanceHarness

NOW = fixed.T0 + 1  # message timestamps; the first case's block time


@dataclass(frozen=True)
class Faulty:
    """A custody key whose signature is broken by `fault(inner, digest)`."""

    inner: Any
    fault: Callable[[Any, bytes], CustodySignature]

    @property
    def signature_type(self) -> int:
        return int(self.inner.signature_type)

    @property
    def address(self) -> bytes:
        return bytes(self.inner.address)

    def custody_signature(self, digest: bytes) -> CustodySignature:
        return self.fault(self.inner, digest)


def _with_rs(sig: CustodySignature, rs: ecdsa.RS, v: bytes = b"") -> CustodySignature:
    return CustodySignature(
        sig.signature_type, ecdsa.join_raw(rs) + v, sig.public_key, sig.authenticator_data, sig.client_data_json
    )


def _high_s(key: Any, digest: bytes) -> CustodySignature:
    sig: CustodySignature = key.custody_signature(digest)
    rs = ecdsa.split_raw(sig.signature[:64])
    n = ecdsa.SECP256K1_N if sig.signature_type == 1 else ecdsa.P256_N
    # The twin (r, n - s) recovers the same key with the other recovery id (v 27 <-> 28).
    v = bytes([55 - sig.signature[64]]) if sig.signature_type == 1 else b""
    return _with_rs(sig, ecdsa.RS(rs.r, n - rs.s), v)


def _flip_r(key: Any, digest: bytes) -> CustodySignature:
    sig: CustodySignature = key.custody_signature(digest)
    rs = ecdsa.split_raw(sig.signature[:64])
    return _with_rs(sig, ecdsa.RS(rs.r ^ 1, rs.s), sig.signature[64:])


def _other_digest(key: Any, digest: bytes) -> CustodySignature:
    sig: CustodySignature = key.custody_signature(blake3_256(digest))
    return sig


class CrossOrigin(fixed.WebAuthn):
    def assertion(self, challenge: bytes) -> Any:
        a = self.authenticator
        data = a.authenticator_data()
        client = a.client_data_json(challenge).replace(b'"crossOrigin":false', b'"crossOrigin":true')
        return type(a.get_assertion(challenge))(data, client, a.sign(data, client))


def _carol(key: str = "carol/ed25519", network: pb.Network.ValueType = fixed.NETWORK) -> MessageBuilder:
    return MessageBuilder(fixed.secp256k1("carol/wallet").address, fixed.ed25519(key), network=network, clock=_now)


def _now() -> float:
    return float(NOW)


def _signer_add(custody: Any, nonce: int = 0, **kw: Any) -> pb.Message:
    return _carol().signer_add(custody, nonce, **kw)


def _tamper(msg: pb.Message, fn: Callable[[pb.Message], None]) -> pb.Message:
    out = pb.Message()
    out.CopyFrom(msg)
    fn(out)
    return out


def _resign(data: pb.MessageData) -> pb.Message:
    return sign_message(data, fixed.ed25519("carol/ed25519"))


def _data(msg: pb.Message, **changes: Any) -> pb.MessageData:
    data = pb.MessageData()
    data.CopyFrom(msg.data)
    for name, value in changes.items():
        setattr(data, name, value)
    return data


def _reordered(msg: pb.Message) -> bytes:
    """data_bytes with the timestamp field moved last: decodes to the same data, is not canonical."""
    without = _data(msg, timestamp=0)
    return encode_data(without) + encode_data(pb.MessageData(timestamp=msg.data.timestamp))


def _envelope_cases() -> list[tuple[str, pb.Message, Reason, dict[str, str]]]:
    good = _carol().project_create("p")
    other_key = fixed.ed25519("carol/other")
    return [
        ("hash_mismatch", _tamper(good, lambda m: setattr(m, "hash", blake3_256(m.hash))), Reason.HASH_MISMATCH, {}),
        (
            "data_bytes_not_canonical",
            _tamper(good, lambda m: setattr(m, "data_bytes", _reordered(m))),
            Reason.DATA_BYTES_MISMATCH,
            {},
        ),
        (
            "signature_by_another_key",
            _tamper(good, lambda m: setattr(m, "signature", other_key.sign(m.hash))),
            Reason.INVALID_SIGNATURE,
            {},
        ),
        ("signer_31_bytes", _tamper(good, lambda m: setattr(m, "signer", m.signer[:31])), Reason.INVALID_SIGNATURE, {}),
        ("wrong_network", _carol(network=pb.NETWORK_TESTNET).project_create("p"), Reason.WRONG_NETWORK, {}),
        ("disabled_type_12", _resign(_data(good, type=12)), Reason.DISABLED_MESSAGE_TYPE, {}),
        ("disabled_type_63", _resign(_data(good, type=63)), Reason.DISABLED_MESSAGE_TYPE, {}),
        ("unknown_type_99", _resign(_data(good, type=99)), Reason.UNKNOWN_MESSAGE_TYPE, {}),
        ("unspecified_type", _resign(_data(good, type=0)), Reason.UNKNOWN_MESSAGE_TYPE, {}),
        ("body_mismatch", _resign(_data(good, type=pb.MESSAGE_TYPE_PROJECT_REMOVE)), Reason.BODY_MISMATCH, {}),
        (
            "empty_body",  # the set oneof member is written even when empty: data_bytes ends with its tag, length 0
            _carol().project_remove(b""),
            Reason.INVALID_FIELD,
            {"field": "project_id"},
        ),
        (
            "owner_19_bytes",
            _resign(_data(good, owner_address=good.data.owner_address[:19])),
            Reason.INVALID_FIELD,
            {"field": "owner_address"},
        ),
        ("future_timestamp", _resign(_data(good, timestamp=NOW + 1000)), Reason.FUTURE_TIMESTAMP, {}),
        ("stale_quota_type", _resign(_data(good, timestamp=NOW - 1000)), Reason.STALE_TIMESTAMP, {}),
        (
            "stale_quota_remove",  # removes that tombstone a quota-counted element are stale-checked too
            _carol().follow(fixed.secp256k1("alice/wallet").address, remove=True, timestamp=NOW - 1000),
            Reason.STALE_TIMESTAMP,
            {},
        ),
        (
            "old_non_quota_type_reaches_signer_check",
            _carol().project_remove(bytes(range(32)), timestamp=NOW - 1000),
            Reason.UNKNOWN_SIGNER,
            {},
        ),
    ]


def _custody_cases() -> list[tuple[str, pb.Message, Reason, dict[str, str]]]:
    wallet, p256 = fixed.secp256k1("carol/wallet"), fixed.p256("carol/p256")
    passkey = fixed.WebAuthn("carol/passkey")
    invalid = Reason.CUSTODY_SIGNATURE_INVALID

    def testnet_sig(key: Any, digest: bytes) -> CustodySignature:
        sig: CustodySignature = key.custody_signature(
            eip712.signer_add_digest(
                pb.NETWORK_TESTNET,
                owner=key.address,
                key=fixed.ed25519("carol/ed25519").public_key,
                scope=1,
                allowed_projects=[],
                nonce=0,
                valid_after=NOW - 60,
                deadline=NOW + 540,
            )
        )
        return sig

    return [
        (
            "signer_add_not_signed_by_added_key",
            _resign(_signer_add(wallet, key=fixed.ed25519("carol/other")).data),
            Reason.INVALID_FIELD,
            {"field": "signer"},
        ),
        ("custody_nonce_mismatch", _signer_add(wallet, nonce=1), Reason.NONCE_MISMATCH, {}),
        ("secp256k1_tampered_digest", _signer_add(Faulty(wallet, _other_digest)), Reason.CUSTODY_KEY_UNKNOWN, {}),
        ("secp256k1_signed_for_testnet", _signer_add(Faulty(wallet, testnet_sig)), Reason.CUSTODY_KEY_UNKNOWN, {}),
        ("secp256k1_high_s", _signer_add(Faulty(wallet, _high_s)), invalid, {"cause": "HIGH_S_SIGNATURE"}),
        ("p256_high_s", _signer_add(Faulty(p256, _high_s)), invalid, {"cause": "HIGH_S_SIGNATURE"}),
        ("p256_tampered_r", _signer_add(Faulty(p256, _flip_r)), invalid, {"cause": "INVALID_SIGNATURE"}),
        ("p256_valid_but_not_a_custody_key", _signer_add(p256), Reason.CUSTODY_KEY_UNKNOWN, {}),
        ("webauthn_high_s", _signer_add(Faulty(passkey, _high_s)), invalid, {"cause": "HIGH_S_SIGNATURE"}),
        (
            "webauthn_missing_uv",
            _signer_add(fixed.WebAuthn("carol/passkey", user_verified=False)),
            invalid,
            {"cause": "WEBAUTHN_FLAGS"},
        ),
        (
            "webauthn_wrong_challenge",
            _signer_add(Faulty(passkey, _other_digest)),
            invalid,
            {"cause": "WEBAUTHN_CHALLENGE"},
        ),
        (
            "webauthn_wrong_origin",
            _signer_add(fixed.WebAuthn("carol/passkey", origin="https://evil.example")),
            invalid,
            {"cause": "WEBAUTHN_ORIGIN"},
        ),
        ("webauthn_cross_origin", _signer_add(CrossOrigin("carol/passkey")), invalid, {"cause": "WEBAUTHN_ORIGIN"}),
        (
            "webauthn_wrong_rp_id",
            _signer_add(fixed.WebAuthn("carol/passkey", rp_id="example.com")),
            invalid,
            {"cause": "WEBAUTHN_RP_ID"},
        ),
    ]


def _authority_cases(h_: ConformanceHarness) -> list[tuple[str, pb.Message, Reason, dict[str, str]]]:
    """Cases that need a registered signer: the storage authority's."""
    b = MessageBuilder(h_.authority.address, h_.authority.key, clock=_now)
    external = fixed.secp256k1("carol/external")
    digest = eip712.verification_claim_digest(
        fixed.NETWORK, owner=h_.authority.address, verified_address=external.address, timestamp=NOW - 1
    )
    claim = pb.VerificationAddBody(address=external.address, claim_signature=external.sign_digest(digest))
    wrong_ts = b.build(pb.MESSAGE_TYPE_VERIFICATION_ADD, "verification_add", claim, NOW)
    return [
        ("verification_claim_over_another_timestamp", wrong_ts, Reason.INVALID_SIGNATURE, {}),
        ("verification_add_valid_claim_no_storage", b.verification_add(external), Reason.NO_STORAGE, {}),
    ]


def cases(h_: ConformanceHarness) -> list[tuple[str, pb.Message, Reason, dict[str, str]]]:
    return _envelope_cases() + _custody_cases() + _authority_cases(h_)


def family(path: Path) -> dict[str, Any]:
    h_ = ConformanceHarness(path)
    out = []
    for name, msg, reason, values in cases(h_):
        entry = vector(name, msg) | {"message_proto": h(msg.SerializeToString(deterministic=True))}
        entry |= {"block_time": h_.now, "reason": reason.value} | values
        err = h_.reject(msg, reason)  # generation fails if the transition does not answer `reason`
        assert all(err.values.get(k) == v for k, v in values.items()), (name, err.values)
        out.append(entry)
    return {
        "family": "rejected",
        "version": fixed.VERSION,
        "description": (__doc__ or "").strip().replace("\n", " "),
        "network": pb.Network.Name(fixed.NETWORK),
        "state": {
            "registered_signers": [
                {"owner": h(h_.authority.address), "key": h(h_.authority.key.public_key), "scope": 1}
            ],
            "custody_nonces": {h(h_.authority.address): 1},
            "storage_authorities": [h(h_.authority.address)],
            "webauthn_rp_id": fixed.RP_ID,
        },
        "cases": out,
    }
