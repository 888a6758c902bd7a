from __future__ import annotations

import hashlib

from hypothesis import given
from hypothesis import strategies as st

from node.crypto.hashing import blake3_256, keccak256, sha256


def test_keccak256_known_vectors() -> None:
    assert keccak256(b"").hex() == "c5d2460186f7233c927e7db2dcc703c0e500b653ca82273b7bfad8045d85a470"
    assert keccak256(b"abc").hex() == "4e03657aea45a94fc7d47ba826c8d667c0d1e6e33a64a036ec44f58fa12d6c45"


def test_keccak256_is_not_sha3() -> None:
    assert keccak256(b"abc") != hashlib.sha3_256(b"abc").digest()


def test_blake3_256_known_vector() -> None:
    assert blake3_256(b"").hex() == "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262"


@given(st.binary(max_size=512))
def test_output_sizes_and_types(data: bytes) -> None:
    for function in (keccak256, blake3_256, sha256):
        digest = function(data)
        assert type(digest) is bytes
        assert len(digest) == 32
    assert sha256(data) == hashlib.sha256(data).digest()
