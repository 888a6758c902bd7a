"""Signing keys the node itself may hold: a delegated Ed25519 key and a secp256k1 custody wallet.

The devnet's storage authority (node.authority) signs its bootstrap SIGNER_ADD with these; the client SDK
(node.sdk.keys) exposes the same classes beside its P-256 and passkey keys, which only clients hold.
Verification is elsewhere in node.crypto (``ed25519``, ``ecdsa``, ``custody``).
"""

from __future__ import annotations

import coincurve
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from node.crypto import ecdsa
from node.crypto.address import address_of_coordinates
from node.crypto.custody import CustodySignature, SignatureType

PRIVATE_KEY_SIZE = 32


def check_private_size(private_bytes: bytes) -> None:
    if len(private_bytes) != PRIVATE_KEY_SIZE:
        raise ValueError(f"private key must be {PRIVATE_KEY_SIZE} bytes, got {len(private_bytes)}")


class Ed25519Key:
    """A delegated Ed25519 key."""

    def __init__(self, private_key: Ed25519PrivateKey) -> None:
        self._private_key = private_key

    @classmethod
    def generate(cls) -> Ed25519Key:
        return cls(Ed25519PrivateKey.generate())

    @classmethod
    def from_private_bytes(cls, private_bytes: bytes) -> Ed25519Key:
        """From the 32-byte RFC 8032 seed."""
        check_private_size(private_bytes)
        return cls(Ed25519PrivateKey.from_private_bytes(private_bytes))

    def __repr__(self) -> str:
        return f"Ed25519Key(public_key={self.public_key.hex()})"

    def private_bytes(self) -> bytes:
        """The 32-byte seed (secret)."""
        return self._private_key.private_bytes_raw()

    @property
    def public_key(self) -> bytes:
        """32 bytes."""
        return self._private_key.public_key().public_bytes_raw()

    def sign(self, message: bytes) -> bytes:
        """64-byte Ed25519 signature."""
        return self._private_key.sign(message)


class Secp256k1Key:
    """An Ethereum-style custody key (signature type 1)."""

    signature_type = SignatureType.SECP256K1

    def __init__(self, private_key: coincurve.PrivateKey) -> None:
        self._private_key = private_key

    @classmethod
    def generate(cls) -> Secp256k1Key:
        return cls(coincurve.PrivateKey())

    @classmethod
    def from_private_bytes(cls, private_bytes: bytes) -> Secp256k1Key:
        """From the 32-byte big-endian scalar (an Ethereum private key)."""
        check_private_size(private_bytes)
        return cls(coincurve.PrivateKey(private_bytes))

    def __repr__(self) -> str:
        return f"Secp256k1Key(address=0x{self.address.hex()})"

    def private_bytes(self) -> bytes:
        return bytes(self._private_key.secret)

    @property
    def public_key(self) -> bytes:
        """64-byte ``x ‖ y``."""
        return bytes(self._private_key.public_key.format(compressed=False)[1:])

    @property
    def address(self) -> bytes:
        """The Ethereum address."""
        return address_of_coordinates(self.public_key)

    def sign_digest(self, digest: bytes) -> bytes:
        """65-byte ``r ‖ s ‖ v``, low-S (libsecp256k1 always normalizes), v in {27, 28}."""
        ecdsa.check_digest(digest)
        recoverable = self._private_key.sign_recoverable(digest, hasher=None)
        return recoverable[: ecdsa.RAW_SIGNATURE_SIZE] + bytes([recoverable[-1] + ecdsa.ETHEREUM_V_OFFSET])

    def custody_signature(self, digest: bytes) -> CustodySignature:
        return CustodySignature(signature_type=self.signature_type, signature=self.sign_digest(digest))
