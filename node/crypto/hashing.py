"""Hash functions used by the chain: Keccak-256 (EIP-712, addresses), BLAKE3-256 (message ids), SHA-256."""

from __future__ import annotations

import hashlib

import blake3
from Crypto.Hash import keccak

DIGEST_SIZE = 32


def keccak256(data: bytes) -> bytes:
    """Keccak-256 as used by Ethereum (the original Keccak padding, not NIST SHA3-256)."""
    return bytes(keccak.new(digest_bits=256, data=data).digest())


def blake3_256(data: bytes) -> bytes:
    """BLAKE3 with the default 32-byte output."""
    return bytes(blake3.blake3(data).digest())


def sha256(data: bytes) -> bytes:
    """SHA-256 (WebAuthn rpIdHash and the client-data hash)."""
    return hashlib.sha256(data).digest()
