"""Verification of custody signatures: the single entry point ``verify_custody_signature``.

A custody signature authorizes keychain and delegated-key changes (SIGNER_*, KEYCHAIN_*) and
verifications. It signs a 32-byte EIP-712 digest (``node.crypto.eip712``) with one of three key types:

- ``SECP256K1`` (1): 65-byte ``r ‖ s ‖ v`` (v in 0, 1, 27, 28), low-S; ``public_key`` must be empty and
  the key is recovered. The address is the Ethereum address of the recovered key.
- ``P256`` (2): 64-byte ``r ‖ s``, low-S, ECDSA over the digest itself (prehashed); ``public_key`` is
  64-byte ``x ‖ y`` or 65-byte ``0x04 ‖ x ‖ y``.
- ``WEBAUTHN`` (3): a passkey assertion whose challenge is the digest; see ``node.crypto.webauthn``.

The returned 20-byte address identifies the key that signed. The caller must check that this key is the
one the message claims and that it is active in the owner's keychain: for secp256k1 in particular, a
tampered digest or signature usually recovers *some* other key rather than failing.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from cryptography.hazmat.primitives.asymmetric import ec

from node.crypto import ecdsa
from node.crypto.address import (
    InvalidPublicKeyError,
    address_of_coordinates,
    load_p256_public_key,
    p256_address,
    secp256k1_address,
    uncompressed_coordinates,
)
from node.crypto.errors import CustodyReason, CustodySignatureError
from node.crypto.webauthn import WebAuthnPolicy, check_assertion

__all__ = [
    "CustodyReason",
    "CustodySignature",
    "CustodySignatureError",
    "SignatureType",
    "WebAuthnPolicy",
    "custody_key_address",
    "p256_address",
    "secp256k1_address",
    "verify_custody_signature",
]


class SignatureType(IntEnum):
    """Custody key / signature types (wire values)."""

    SECP256K1 = 1
    P256 = 2
    WEBAUTHN = 3


@dataclass(frozen=True)
class CustodySignature:
    """A custody signature as carried in a message.

    ``public_key`` is empty for secp256k1 (the key is recovered); ``authenticator_data`` and
    ``client_data_json`` are used by WebAuthn only and must be empty for the other types.
    """

    signature_type: int
    signature: bytes
    public_key: bytes = b""
    authenticator_data: bytes = b""
    client_data_json: bytes = b""


def custody_key_address(signature_type: int, public_key: bytes) -> bytes:
    """The 20-byte key id of a custody public key (64 or 65 bytes, checked to be on the curve).

    Raises ``ValueError`` (``InvalidPublicKeyError``) for a bad key or an unknown signature type.
    """
    if signature_type == SignatureType.SECP256K1:
        return secp256k1_address(public_key)
    if signature_type in (SignatureType.P256, SignatureType.WEBAUTHN):
        return p256_address(public_key)
    raise ValueError(f"unknown signature type {signature_type}")


def _malformed(detail: str) -> CustodySignatureError:
    return CustodySignatureError(CustodyReason.MALFORMED_SIGNATURE, detail)


def _require_empty(sig: CustodySignature, *names: str) -> None:
    for name in names:
        if getattr(sig, name):
            raise _malformed(f"{name} must be empty for signature type {sig.signature_type}")


def _p256_key(public_key: bytes) -> tuple[ec.EllipticCurvePublicKey, bytes]:
    """The loaded P-256 key and its address; a bad key is MALFORMED_SIGNATURE."""
    try:
        key = load_p256_public_key(public_key)
    except InvalidPublicKeyError as error:
        raise _malformed(f"public key: {error}") from None
    return key, address_of_coordinates(uncompressed_coordinates(public_key))


def _verify_secp256k1(sig: CustodySignature, digest: bytes) -> bytes:
    _require_empty(sig, "public_key", "authenticator_data", "client_data_json")
    return address_of_coordinates(ecdsa.recover_secp256k1(sig.signature, digest))


def _verify_p256(sig: CustodySignature, digest: bytes) -> bytes:
    _require_empty(sig, "authenticator_data", "client_data_json")
    rs = ecdsa.split_raw(sig.signature)
    ecdsa.check_scalars(rs, ecdsa.P256_N)
    key, address = _p256_key(sig.public_key)
    ecdsa.verify_p256(key, rs, digest)
    return address


def _verify_webauthn(sig: CustodySignature, digest: bytes, policy: WebAuthnPolicy) -> bytes:
    if len(sig.signature) == ecdsa.RAW_SIGNATURE_SIZE:
        rs = ecdsa.split_raw(sig.signature)
    else:
        rs = ecdsa.split_der(sig.signature)
    ecdsa.check_scalars(rs, ecdsa.P256_N)
    key, address = _p256_key(sig.public_key)
    signed = check_assertion(sig.authenticator_data, sig.client_data_json, digest, policy)
    ecdsa.verify_p256(key, rs, signed)
    return address


def verify_custody_signature(sig: CustodySignature, digest: bytes, *, webauthn_policy: WebAuthnPolicy) -> bytes:
    """Verify ``sig`` over the 32-byte ``digest``; return the signing key's 20-byte address.

    Raises ``CustodySignatureError`` with a ``CustodyReason`` on any rejection, and ``ValueError`` only
    if ``digest`` is not 32 bytes (a caller bug, not a property of the signature).
    """
    ecdsa.check_digest(digest)
    if sig.signature_type == SignatureType.SECP256K1:
        return _verify_secp256k1(sig, digest)
    if sig.signature_type == SignatureType.P256:
        return _verify_p256(sig, digest)
    if sig.signature_type == SignatureType.WEBAUTHN:
        return _verify_webauthn(sig, digest, webauthn_policy)
    raise CustodySignatureError(
        CustodyReason.UNSUPPORTED_SIGNATURE_TYPE, f"signature type {sig.signature_type} is not supported"
    )
