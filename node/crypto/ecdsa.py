"""ECDSA for custody keys: secp256k1 public-key recovery and P-256 verification, both low-S only.

Low-S: a signature ``(r, s)`` with ``s > n/2`` is rejected (``HIGH_S_SIGNATURE``) because ``(r, n - s)``
is equally valid; accepting only one of the two makes signatures non-malleable. Signers normalize.
"""

from __future__ import annotations

from typing import NamedTuple

import coincurve
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import (
    Prehashed,
    decode_dss_signature,
    encode_dss_signature,
)

from node.crypto.errors import CustodyReason, CustodySignatureError

SECP256K1_N = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141
P256_N = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551
SCALAR_SIZE = 32
RAW_SIGNATURE_SIZE = 2 * SCALAR_SIZE
RECOVERABLE_SIGNATURE_SIZE = RAW_SIGNATURE_SIZE + 1
DIGEST_SIZE = 32
ETHEREUM_V_OFFSET = 27
_PREHASHED_ECDSA = ec.ECDSA(Prehashed(hashes.SHA256()))


class RS(NamedTuple):
    """The two scalars of an ECDSA signature."""

    r: int
    s: int


def _malformed(detail: str) -> CustodySignatureError:
    return CustodySignatureError(CustodyReason.MALFORMED_SIGNATURE, detail)


def check_digest(digest: bytes) -> None:
    """Custody signatures are over 32-byte digests; anything else is a caller bug (``ValueError``)."""
    if not isinstance(digest, bytes) or len(digest) != DIGEST_SIZE:
        raise ValueError(f"digest must be {DIGEST_SIZE} bytes")


def check_scalars(rs: RS, order: int) -> None:
    """``1 <= r < n`` and ``1 <= s <= n/2``, else MALFORMED_SIGNATURE or HIGH_S_SIGNATURE."""
    if not 0 < rs.r < order:
        raise _malformed("r out of range")
    if not 0 < rs.s < order:
        raise _malformed("s out of range")
    if rs.s > order // 2:
        raise CustodySignatureError(CustodyReason.HIGH_S_SIGNATURE, "s must be at most n/2 (low-S)")


def split_raw(signature: bytes) -> RS:
    """``r ‖ s`` as two 32-byte big-endian scalars (no range check)."""
    if len(signature) != RAW_SIGNATURE_SIZE:
        raise _malformed(f"expected {RAW_SIGNATURE_SIZE}-byte r||s, got {len(signature)} bytes")
    return RS(
        int.from_bytes(signature[:SCALAR_SIZE], "big"),
        int.from_bytes(signature[SCALAR_SIZE:], "big"),
    )


def join_raw(rs: RS) -> bytes:
    """The 64-byte ``r ‖ s`` form."""
    return rs.r.to_bytes(SCALAR_SIZE, "big") + rs.s.to_bytes(SCALAR_SIZE, "big")


def split_der(signature: bytes) -> RS:
    """A strict-DER ``ECDSA-Sig-Value`` (as WebAuthn authenticators return it)."""
    try:
        r, s = decode_dss_signature(signature)
    except ValueError:
        raise _malformed("signature is neither 64-byte r||s nor valid DER") from None
    if encode_dss_signature(r, s) != signature:
        raise _malformed("signature is not canonical DER")
    return RS(r, s)


def low_s(rs: RS, order: int) -> RS:
    """The low-S twin of a signature (what signers must submit)."""
    return rs if rs.s <= order // 2 else RS(rs.r, order - rs.s)


def recover_secp256k1(signature: bytes, digest: bytes) -> bytes:
    """The 64-byte ``x ‖ y`` public key that produced the 65-byte ``r ‖ s ‖ v`` signature of ``digest``.

    ``v`` is 0/1 or 27/28. A signature that recovers no key is INVALID_SIGNATURE; the caller must still
    compare the resulting address with the key it expects (recovery yields *some* key for most inputs).
    """
    check_digest(digest)
    if len(signature) != RECOVERABLE_SIGNATURE_SIZE:
        raise _malformed(f"secp256k1 signature must be 65 bytes r||s||v, got {len(signature)} bytes")
    v = signature[RAW_SIGNATURE_SIZE]
    recovery_id = v - ETHEREUM_V_OFFSET if v >= ETHEREUM_V_OFFSET else v
    if recovery_id not in (0, 1):
        raise _malformed(f"v must be 0, 1, 27 or 28, got {v}")
    check_scalars(split_raw(signature[:RAW_SIGNATURE_SIZE]), SECP256K1_N)
    try:
        key = coincurve.PublicKey.from_signature_and_message(
            signature[:RAW_SIGNATURE_SIZE] + bytes([recovery_id]), digest, hasher=None
        )
    except ValueError:
        raise CustodySignatureError(CustodyReason.INVALID_SIGNATURE, "no public key recovers") from None
    return bytes(key.format(compressed=False)[1:])


def verify_p256(public_key: ec.EllipticCurvePublicKey, rs: RS, digest: bytes) -> None:
    """ECDSA P-256 verification of ``rs`` over the 32-byte ``digest`` used directly (prehashed)."""
    check_digest(digest)
    check_scalars(rs, P256_N)
    try:
        public_key.verify(encode_dss_signature(rs.r, rs.s), digest, _PREHASHED_ECDSA)
    except InvalidSignature:
        raise CustodySignatureError(CustodyReason.INVALID_SIGNATURE, "P-256 signature does not verify") from None
