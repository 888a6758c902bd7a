"""The software WebAuthn authenticator produces real, well-formed assertions."""

from __future__ import annotations

import base64
import hashlib
import json

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec

from node.crypto.custody import CustodySignature, SignatureType, verify_custody_signature
from node.crypto.ecdsa import P256_N, RS, join_raw, low_s, split_der
from node.crypto.webauthn import WebAuthnPolicy
from node.sdk.webauthn import Assertion, SoftwareAuthenticator

RP_ID = "app.example"
CHALLENGE = bytes(range(100, 132))


def test_assertion_layout() -> None:
    authenticator = SoftwareAuthenticator.generate(rp_id=RP_ID)
    assertion = authenticator.get_assertion(CHALLENGE)
    assert isinstance(assertion, Assertion)
    authenticator_data, client_data_json, signature = assertion

    assert len(authenticator_data) == 37
    assert authenticator_data[:32] == hashlib.sha256(RP_ID.encode()).digest()
    assert authenticator_data[32] == 0x05  # UP | UV
    assert int.from_bytes(authenticator_data[33:37], "big") == 1

    assert json.loads(client_data_json) == {
        "type": "webauthn.get",
        "challenge": base64.urlsafe_b64encode(CHALLENGE).rstrip(b"=").decode(),
        "origin": f"https://{RP_ID}",
        "crossOrigin": False,
    }
    assert client_data_json.startswith(b'{"type":"webauthn.get","challenge":"')
    assert b"=" not in client_data_json

    signed = authenticator_data + hashlib.sha256(client_data_json).digest()
    authenticator.private_key.public_key().verify(signature, signed, ec.ECDSA(hashes.SHA256()))


def test_counter_increments_big_endian_and_wraps() -> None:
    authenticator = SoftwareAuthenticator(ec.generate_private_key(ec.SECP256R1()), rp_id=RP_ID, sign_count=0xFFFFFFFE)
    first = authenticator.get_assertion(CHALLENGE).authenticator_data
    second = authenticator.get_assertion(CHALLENGE).authenticator_data
    assert first[33:37] == b"\xff\xff\xff\xff"
    assert second[33:37] == b"\x00\x00\x00\x00"
    assert authenticator.sign_count == 0


def test_flags_follow_user_presence_and_verification() -> None:
    authenticator = SoftwareAuthenticator.generate(rp_id=RP_ID)
    authenticator.user_verified = False
    assert authenticator.get_assertion(CHALLENGE).authenticator_data[32] == 0x01
    authenticator.user_present = False
    assert authenticator.get_assertion(CHALLENGE).authenticator_data[32] == 0x00


def test_custom_origin() -> None:
    authenticator = SoftwareAuthenticator.generate(rp_id="localhost", origin="http://localhost:5173")
    client_data = json.loads(authenticator.get_assertion(CHALLENGE).client_data_json)
    assert client_data["origin"] == "http://localhost:5173"


def test_assertion_verifies_on_the_node_after_low_s_normalization() -> None:
    authenticator = SoftwareAuthenticator.generate(rp_id=RP_ID)
    policy = WebAuthnPolicy(rp_id=RP_ID)
    high_s_seen = False
    for _ in range(40):
        authenticator_data, client_data_json, der = authenticator.get_assertion(CHALLENGE)
        rs = split_der(der)
        high_s_seen = high_s_seen or rs.s > P256_N // 2
        signature = CustodySignature(
            signature_type=SignatureType.WEBAUTHN,
            signature=join_raw(low_s(RS(rs.r, rs.s), P256_N)),
            public_key=authenticator.public_key,
            authenticator_data=authenticator_data,
            client_data_json=client_data_json,
        )
        assert verify_custody_signature(signature, CHALLENGE, webauthn_policy=policy) == authenticator.address
    assert high_s_seen, "like real authenticators, the software one does not normalize S"


def test_rejects_other_curves_and_bad_counters() -> None:
    with pytest.raises(ValueError, match="P-256"):
        SoftwareAuthenticator(ec.generate_private_key(ec.SECP384R1()), rp_id=RP_ID)
    with pytest.raises(ValueError, match="uint32"):
        SoftwareAuthenticator(ec.generate_private_key(ec.SECP256R1()), rp_id=RP_ID, sign_count=2**32)


def test_repr_shows_no_secret() -> None:
    authenticator = SoftwareAuthenticator.generate(rp_id=RP_ID)
    secret = authenticator.private_key.private_numbers().private_value.to_bytes(32, "big").hex()
    assert secret not in repr(authenticator)
    assert authenticator.address.hex() in repr(authenticator)
