"""P-256 custody signatures (type 2): 64-byte low-S r||s over the digest itself."""

from __future__ import annotations

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import Prehashed
from hypothesis import given, settings
from hypothesis import strategies as st

from node.crypto import ecdsa
from node.crypto.address import address_of_coordinates, p256_address
from node.crypto.custody import (
    CustodySignature,
    CustodySignatureError,
    SignatureType,
    custody_key_address,
    verify_custody_signature,
)
from node.crypto.errors import CustodyReason
from node.crypto.hashing import keccak256
from tests.node.crypto.custody_helpers import (
    DIGEST,
    POLICY,
    assert_rejected,
    der_to_low_s_raw,
    flips,
    high_s_raw,
    reason_of,
    replace,
)

KEY = ec.derive_private_key(0x1234567890ABCDEF, ec.SECP256R1())
NUMBERS = KEY.public_key().public_numbers()
PUBLIC = NUMBERS.x.to_bytes(32, "big") + NUMBERS.y.to_bytes(32, "big")
ADDRESS = keccak256(PUBLIC)[-20:]


def sign(digest: bytes) -> bytes:
    return der_to_low_s_raw(KEY.sign(digest, ec.ECDSA(Prehashed(hashes.SHA256()))))


def custody(signature: bytes, public_key: bytes = PUBLIC) -> CustodySignature:
    return CustodySignature(signature_type=SignatureType.P256, signature=signature, public_key=public_key)


@pytest.mark.parametrize("public_key", [PUBLIC, b"\x04" + PUBLIC])
def test_accepted_with_64_and_65_byte_keys(public_key: bytes) -> None:
    assert verify_custody_signature(custody(sign(DIGEST), public_key), DIGEST, webauthn_policy=POLICY) == ADDRESS


def test_address_derivation() -> None:
    assert p256_address(PUBLIC) == ADDRESS == address_of_coordinates(PUBLIC)
    assert custody_key_address(SignatureType.P256, b"\x04" + PUBLIC) == ADDRESS
    assert custody_key_address(SignatureType.WEBAUTHN, PUBLIC) == ADDRESS


def test_every_byte_flip_rejected() -> None:
    signature = sign(DIGEST)
    for _, _, tampered in flips(signature):
        assert_rejected(custody(tampered), DIGEST, ADDRESS)
    for _, _, tampered in flips(DIGEST):
        assert_rejected(custody(signature), tampered, ADDRESS)
    for _, _, tampered in flips(PUBLIC):
        assert_rejected(custody(signature, tampered), DIGEST, ADDRESS)
    for _, _, tampered in flips(b"\x04" + PUBLIC):
        assert_rejected(custody(signature, tampered), DIGEST, ADDRESS)


@settings(max_examples=30, deadline=None)
@given(st.binary(min_size=32, max_size=32), st.data())
def test_random_digests_and_flips(digest: bytes, data: st.DataObject) -> None:
    signature = sign(digest)
    assert verify_custody_signature(custody(signature), digest, webauthn_policy=POLICY) == ADDRESS
    position = data.draw(st.integers(min_value=0, max_value=63))
    mask = data.draw(st.integers(min_value=1, max_value=255))
    tampered = bytearray(signature)
    tampered[position] ^= mask
    with pytest.raises(CustodySignatureError):
        verify_custody_signature(custody(bytes(tampered)), digest, webauthn_policy=POLICY)


def test_high_s_rejected() -> None:
    twin = high_s_raw(sign(DIGEST), ecdsa.P256_N)
    assert reason_of(custody(twin), DIGEST) == CustodyReason.HIGH_S_SIGNATURE


def test_der_is_not_accepted_for_plain_p256() -> None:
    der = KEY.sign(DIGEST, ec.ECDSA(Prehashed(hashes.SHA256())))
    assert reason_of(custody(der), DIGEST) == CustodyReason.MALFORMED_SIGNATURE


@pytest.mark.parametrize(
    "public_key",
    [b"", PUBLIC[:63], b"\x05" + PUBLIC, b"\x02" + PUBLIC[:32], PUBLIC[:32] + b"\x00" * 32, b"\x00" * 64],
)
def test_bad_public_key_is_malformed(public_key: bytes) -> None:
    assert reason_of(custody(sign(DIGEST), public_key), DIGEST) == CustodyReason.MALFORMED_SIGNATURE


@pytest.mark.parametrize(
    "signature",
    [
        b"\x00" * 64,
        b"\x01" * 32 + b"\x00" * 32,
        ecdsa.P256_N.to_bytes(32, "big") + b"\x01" * 32,
        b"\x01" * 32 + ecdsa.P256_N.to_bytes(32, "big"),
        b"\x01" * 63,
        b"\x01" * 65,
    ],
)
def test_out_of_range_scalars_are_malformed(signature: bytes) -> None:
    assert reason_of(custody(signature), DIGEST) == CustodyReason.MALFORMED_SIGNATURE


def test_wrong_key_is_invalid() -> None:
    other = ec.generate_private_key(ec.SECP256R1()).public_key().public_numbers()
    other_public = other.x.to_bytes(32, "big") + other.y.to_bytes(32, "big")
    assert reason_of(custody(sign(DIGEST), other_public), DIGEST) == CustodyReason.INVALID_SIGNATURE


@pytest.mark.parametrize("field", ["authenticator_data", "client_data_json"])
def test_webauthn_fields_must_be_empty(field: str) -> None:
    assert reason_of(replace(custody(sign(DIGEST)), **{field: b"{}"}), DIGEST) == CustodyReason.MALFORMED_SIGNATURE
