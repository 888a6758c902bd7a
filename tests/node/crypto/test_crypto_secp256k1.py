"""secp256k1 custody signatures (type 1): 65-byte r||s||v, low-S, key recovered."""

from __future__ import annotations

import coincurve
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from node.crypto import ecdsa
from node.crypto.address import secp256k1_address
from node.crypto.custody import CustodySignature, SignatureType, custody_key_address, verify_custody_signature
from node.crypto.errors import CustodyReason
from tests.node.crypto.custody_helpers import (
    DIGEST,
    POLICY,
    assert_rejected,
    flips,
    high_s_raw,
    reason_of,
    replace,
)

KEY = coincurve.PrivateKey(b"\x01" * 32)
PUBLIC = KEY.public_key.format(compressed=False)
ADDRESS = secp256k1_address(PUBLIC)


def sign(digest: bytes, *, ethereum_v: bool = True) -> bytes:
    recoverable = KEY.sign_recoverable(digest, hasher=None)
    return recoverable[:64] + bytes([recoverable[64] + (27 if ethereum_v else 0)])


def custody(signature: bytes) -> CustodySignature:
    return CustodySignature(signature_type=SignatureType.SECP256K1, signature=signature)


@pytest.mark.parametrize("ethereum_v", [True, False])
def test_accepted_with_both_v_conventions(ethereum_v: bool) -> None:
    assert (
        verify_custody_signature(custody(sign(DIGEST, ethereum_v=ethereum_v)), DIGEST, webauthn_policy=POLICY)
        == ADDRESS
    )


def test_address_is_the_ethereum_address() -> None:
    # The well-known address of private key 0x01..01 is checked against the uncompressed key derivation.
    assert custody_key_address(SignatureType.SECP256K1, PUBLIC) == ADDRESS
    assert custody_key_address(SignatureType.SECP256K1, PUBLIC[1:]) == ADDRESS


def test_every_byte_flip_of_signature_rejected() -> None:
    signature = sign(DIGEST)
    for _, _, tampered in flips(signature):
        assert_rejected(custody(tampered), DIGEST, ADDRESS)


def test_every_byte_flip_of_digest_rejected() -> None:
    signature = custody(sign(DIGEST))
    for _, _, tampered in flips(DIGEST):
        assert_rejected(signature, tampered, ADDRESS)


@settings(max_examples=30)
@given(st.binary(min_size=32, max_size=32), st.data())
def test_random_digests_and_flips(digest: bytes, data: st.DataObject) -> None:
    signature = sign(digest)
    assert verify_custody_signature(custody(signature), digest, webauthn_policy=POLICY) == ADDRESS
    position = data.draw(st.integers(min_value=0, max_value=len(signature) - 1))
    mask = data.draw(st.integers(min_value=1, max_value=255))
    tampered = bytearray(signature)
    tampered[position] ^= mask
    assert_rejected(custody(bytes(tampered)), digest, ADDRESS)


def test_high_s_rejected() -> None:
    signature = sign(DIGEST)
    recovery_id = (signature[64] - 27) ^ 1
    twin = high_s_raw(signature[:64], ecdsa.SECP256K1_N) + bytes([27 + recovery_id])
    # The high-S twin with the flipped recovery id is a valid ECDSA signature of the same key...
    recovered = coincurve.PublicKey.from_signature_and_message(twin[:64] + bytes([recovery_id]), DIGEST, hasher=None)
    assert recovered.format(compressed=False) == PUBLIC
    # ...and is rejected for malleability.
    assert reason_of(custody(twin), DIGEST) == CustodyReason.HIGH_S_SIGNATURE


@pytest.mark.parametrize(
    ("signature", "reason"),
    [
        (b"", CustodyReason.MALFORMED_SIGNATURE),
        (b"\x01" * 64, CustodyReason.MALFORMED_SIGNATURE),
        (b"\x01" * 66, CustodyReason.MALFORMED_SIGNATURE),
        (b"\x01" * 64 + b"\x02", CustodyReason.MALFORMED_SIGNATURE),
        (b"\x01" * 64 + b"\x1d", CustodyReason.MALFORMED_SIGNATURE),
        (b"\x00" * 32 + b"\x01" * 32 + b"\x1b", CustodyReason.MALFORMED_SIGNATURE),  # r = 0
        (b"\x01" * 32 + b"\x00" * 32 + b"\x1b", CustodyReason.MALFORMED_SIGNATURE),  # s = 0
        (ecdsa.SECP256K1_N.to_bytes(32, "big") + b"\x01" * 32 + b"\x1b", CustodyReason.MALFORMED_SIGNATURE),
        (b"\x01" * 32 + ecdsa.SECP256K1_N.to_bytes(32, "big") + b"\x1b", CustodyReason.MALFORMED_SIGNATURE),
        (b"\x01" * 32 + b"\xff" * 32 + b"\x1b", CustodyReason.MALFORMED_SIGNATURE),  # s >= n
        (b"\x01" * 32 + b"\x7f" + b"\xff" * 31 + b"\x1b", CustodyReason.HIGH_S_SIGNATURE),
    ],
)
def test_malformed_signatures(signature: bytes, reason: CustodyReason) -> None:
    assert reason_of(custody(signature), DIGEST) == reason


def test_unrecoverable_signature_is_invalid() -> None:
    # r = 5 is not the x-coordinate of any curve point with this recovery id for most choices; find one.
    for r in range(1, 200):
        signature = r.to_bytes(32, "big") + (1).to_bytes(32, "big") + b"\x1b"
        try:
            coincurve.PublicKey.from_signature_and_message(signature[:64] + b"\x00", DIGEST, hasher=None)
        except ValueError:
            assert reason_of(custody(signature), DIGEST) == CustodyReason.INVALID_SIGNATURE
            return
    pytest.fail("no unrecoverable r found")


@pytest.mark.parametrize("field", ["public_key", "authenticator_data", "client_data_json"])
def test_extra_fields_must_be_empty(field: str) -> None:
    signature = replace(custody(sign(DIGEST)), **{field: b"\x04" + PUBLIC[1:]})
    assert reason_of(signature, DIGEST) == CustodyReason.MALFORMED_SIGNATURE


@pytest.mark.parametrize("signature_type", [0, 4, 255, -1])
def test_unsupported_signature_type(signature_type: int) -> None:
    signature = replace(custody(sign(DIGEST)), signature_type=signature_type)
    assert reason_of(signature, DIGEST) == CustodyReason.UNSUPPORTED_SIGNATURE_TYPE


@pytest.mark.parametrize("digest", [b"", DIGEST[:31], DIGEST + b"\x00"])
def test_digest_must_be_32_bytes(digest: bytes) -> None:
    with pytest.raises(ValueError, match="digest"):
        verify_custody_signature(custody(sign(DIGEST)), digest, webauthn_policy=POLICY)
