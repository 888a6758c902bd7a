"""20-byte addresses of custody keys, and EIP-55 checksummed address strings.

Every custody key type derives its address the same way: the last 20 bytes of ``keccak256(x ‖ y)`` over
the 64-byte uncompressed public key. For secp256k1 this is exactly the Ethereum address; for P-256 (plain
or WebAuthn) it is the same formula on the P-256 point. Public keys are accepted as 64 bytes ``x ‖ y`` or
as 65 bytes ``0x04 ‖ x ‖ y``; the point must lie on the curve.
"""

from __future__ import annotations

import coincurve
from cryptography.hazmat.primitives.asymmetric import ec

from node.crypto.hashing import keccak256

ADDRESS_SIZE = 20
COORDINATES_SIZE = 64
UNCOMPRESSED_SIZE = 65
_UNCOMPRESSED_PREFIX = b"\x04"


class InvalidPublicKeyError(ValueError):
    """A public key has the wrong length or is not a point on its curve."""


def uncompressed_coordinates(public_key: bytes) -> bytes:
    """The 64-byte ``x ‖ y`` form of a 64-byte or ``0x04``-prefixed 65-byte key (no curve check)."""
    if len(public_key) == COORDINATES_SIZE:
        return bytes(public_key)
    if len(public_key) == UNCOMPRESSED_SIZE and public_key[:1] == _UNCOMPRESSED_PREFIX:
        return bytes(public_key[1:])
    raise InvalidPublicKeyError(f"public key must be 64 bytes x||y or 65 bytes 0x04||x||y, got {len(public_key)} bytes")


def address_of_coordinates(coordinates: bytes) -> bytes:
    """Last 20 bytes of keccak256 of a 64-byte ``x ‖ y``."""
    if len(coordinates) != COORDINATES_SIZE:
        raise InvalidPublicKeyError(f"expected 64 bytes x||y, got {len(coordinates)}")
    return keccak256(coordinates)[-ADDRESS_SIZE:]


def load_p256_public_key(public_key: bytes) -> ec.EllipticCurvePublicKey:
    """Decode and curve-check a P-256 public key given as 64 or 65 bytes."""
    coordinates = uncompressed_coordinates(public_key)
    try:
        return ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), _UNCOMPRESSED_PREFIX + coordinates)
    except ValueError:
        raise InvalidPublicKeyError("not a point on P-256") from None


def p256_address(public_key: bytes) -> bytes:
    """Address of a P-256 (or WebAuthn) key: last 20 bytes of keccak256(x ‖ y); the point is checked."""
    load_p256_public_key(public_key)
    return address_of_coordinates(uncompressed_coordinates(public_key))


def secp256k1_address(public_key: bytes) -> bytes:
    """Ethereum address of a secp256k1 key (64 or 65 bytes); the point is checked."""
    coordinates = uncompressed_coordinates(public_key)
    try:
        coincurve.PublicKey(_UNCOMPRESSED_PREFIX + coordinates)
    except ValueError:
        raise InvalidPublicKeyError("not a point on secp256k1") from None
    return address_of_coordinates(coordinates)


def to_checksum_address(address: bytes) -> str:
    """EIP-55 mixed-case ``0x`` string of a 20-byte address."""
    if len(address) != ADDRESS_SIZE:
        raise ValueError(f"address must be {ADDRESS_SIZE} bytes, got {len(address)}")
    lower = address.hex()
    digest = keccak256(lower.encode("ascii")).hex()[: len(lower)]
    return "0x" + "".join(c.upper() if int(h, 16) >= 8 else c for c, h in zip(lower, digest, strict=True))
