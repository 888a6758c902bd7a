"""Shared helpers for custody-signature tests: byte tampering and rejection checks."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

from node.crypto import ecdsa
from node.crypto.custody import CustodySignature, CustodySignatureError, verify_custody_signature
from node.crypto.webauthn import WebAuthnPolicy

RP_ID = "chain.example"
POLICY = WebAuthnPolicy(rp_id=RP_ID)
MASKS = (0x01, 0x80, 0xFF)
DIGEST = bytes(range(32))


def flips(data: bytes) -> Iterator[tuple[int, int, bytes]]:
    """Every single-byte change of ``data`` by each mask: (position, mask, tampered bytes)."""
    for position in range(len(data)):
        for mask in MASKS:
            tampered = bytearray(data)
            tampered[position] ^= mask
            yield position, mask, bytes(tampered)


def flip(data: bytes, position: int, mask: int) -> bytes:
    tampered = bytearray(data)
    tampered[position] ^= mask
    return bytes(tampered)


def replace(sig: CustodySignature, **changes: bytes | int) -> CustodySignature:
    return dataclasses.replace(sig, **changes)  # type: ignore[arg-type]


def assert_rejected(
    sig: CustodySignature, digest: bytes, expected_address: bytes, policy: WebAuthnPolicy = POLICY
) -> None:
    """Rejected: either an error, or (secp256k1 recovery) an address other than the signer's."""
    try:
        address = verify_custody_signature(sig, digest, webauthn_policy=policy)
    except CustodySignatureError:
        return
    assert address != expected_address, f"tampered signature accepted: {sig!r}"


def reason_of(sig: CustodySignature, digest: bytes, policy: WebAuthnPolicy = POLICY) -> str:
    with pytest.raises(CustodySignatureError) as caught:
        verify_custody_signature(sig, digest, webauthn_policy=policy)
    return caught.value.reason


def high_s_raw(signature: bytes, order: int) -> bytes:
    """The high-S twin of a low-S 64-byte ``r ‖ s``."""
    rs = ecdsa.split_raw(signature[: ecdsa.RAW_SIGNATURE_SIZE])
    assert rs.s <= order // 2
    return ecdsa.join_raw(ecdsa.RS(rs.r, order - rs.s)) + signature[ecdsa.RAW_SIGNATURE_SIZE :]


def der_to_low_s_raw(der: bytes) -> bytes:
    r, s = decode_dss_signature(der)
    return ecdsa.join_raw(ecdsa.low_s(ecdsa.RS(r, s), ecdsa.P256_N))
