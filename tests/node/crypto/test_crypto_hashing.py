from __future__ import annotations

import hashlib

from Crypto.Hash import keccak
from hypothesis import given
from hypothesis import strategies as st

from node.crypto.hashing import blake3_256, keccak256, sha256

# Keccak-256 of 200 bytes of 0xA3 (the Keccak team's long-message vector).
KECCAK_A3_200 = "3a57666b048777f2c953dc4456f45a2588e1cb6f2da760122d530ac2ce607d4a"


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


def test_keccak256_multi_block_vector() -> None:
    # 200 bytes spans two Keccak-256 blocks (rate 136 bytes): the sponge's absorb loop is exercised.
    assert keccak256(b"\xa3" * 200).hex() == KECCAK_A3_200


@given(st.binary(max_size=1024))
def test_keccak256_matches_an_independent_implementation(data: bytes) -> None:
    # pycryptodome's Keccak (installed with the dev group through eth-account) as the reference.
    assert keccak256(data) == keccak.new(digest_bits=256, data=data).digest()
