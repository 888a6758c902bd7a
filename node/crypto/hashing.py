"""Hash functions used by the chain: Keccak-256 (EIP-712, addresses), BLAKE3-256 (message ids), SHA-256.

Keccak-256 comes from safe-pysha3 (a maintained C extension, ~3 ms to import), not pycryptodome: with
cffi installed (cryptography needs it) pycryptodome parses its C declarations with pycparser at import,
55-80 ms of CPU with compiled bytecode (more without) in every chainctl command and every node start.
hashlib's sha3_256 is NIST SHA3 (different padding), not Keccak; tests/node/crypto/test_crypto_hashing.py
pins the Keccak vectors and checks against an independent implementation.
"""

from __future__ import annotations

import hashlib

import blake3
import sha3

DIGEST_SIZE = 32


def keccak256(data: bytes) -> bytes:
    """Keccak-256 as used by Ethereum (the original Keccak padding, not NIST SHA3-256)."""
    return bytes(sha3.keccak_256(data).digest())


def blake3_256(data: bytes) -> bytes:
    """BLAKE3 with the default 32-byte output."""
    return bytes(blake3.blake3(data).digest())


def sha256(data: bytes) -> bytes:
    """SHA-256 (WebAuthn rpIdHash and the client-data hash)."""
    return hashlib.sha256(data).digest()
