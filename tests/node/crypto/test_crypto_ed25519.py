from __future__ import annotations

from typing import Any

import pytest
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from hypothesis import given, settings
from hypothesis import strategies as st

from node.crypto.ed25519 import Ed25519Verifier, sodium_accepts, verify_ed25519
from tests.node.crypto.custody_helpers import flips

# RFC 8032, section 7.1, TEST 1 (empty message).
RFC_PUBLIC = bytes.fromhex("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a")
RFC_SIGNATURE = bytes.fromhex(
    "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e06522490155"
    "5fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"
)

KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
PUBLIC = KEY.public_key().public_bytes_raw()
MESSAGE = b"a delegated-key message" * 3
SIGNATURE = KEY.sign(MESSAGE)


@pytest.fixture(params=["function", "verifier"])
def verify(request: pytest.FixtureRequest) -> Any:
    if request.param == "function":
        return verify_ed25519
    return Ed25519Verifier(cache_size=4).verify


def test_rfc8032_vector(verify: Any) -> None:
    assert verify(RFC_PUBLIC, b"", RFC_SIGNATURE)
    assert not verify(RFC_PUBLIC, b"\x00", RFC_SIGNATURE)


def test_valid_signature(verify: Any) -> None:
    assert verify(PUBLIC, MESSAGE, SIGNATURE) is True


def test_every_tampered_byte_rejected(verify: Any) -> None:
    for _, _, tampered in flips(SIGNATURE):
        assert verify(PUBLIC, MESSAGE, tampered) is False
    for _, _, tampered in flips(PUBLIC):
        assert verify(tampered, MESSAGE, SIGNATURE) is False
    for _, _, tampered in flips(MESSAGE):
        assert verify(PUBLIC, tampered, SIGNATURE) is False


@pytest.mark.parametrize(
    ("public_key", "message", "signature"),
    [
        (PUBLIC[:31], MESSAGE, SIGNATURE),
        (PUBLIC + b"\x00", MESSAGE, SIGNATURE),
        (PUBLIC, MESSAGE, SIGNATURE[:63]),
        (PUBLIC, MESSAGE, SIGNATURE + b"\x00"),
        (b"", b"", b""),
        (PUBLIC.hex(), MESSAGE, SIGNATURE),
        (PUBLIC, MESSAGE.decode(), SIGNATURE),
        (PUBLIC, MESSAGE, None),
        (None, None, None),
        (bytearray(PUBLIC), MESSAGE, SIGNATURE),
        (b"\xff" * 32, MESSAGE, SIGNATURE),  # not a canonical curve point
    ],
)
def test_malformed_input_is_false_and_never_raises(verify: Any, public_key: Any, message: Any, signature: Any) -> None:
    assert verify(public_key, message, signature) is False


@settings(max_examples=50)
@given(st.binary(max_size=300), st.binary(min_size=32, max_size=32))
def test_random_messages(message: bytes, seed: bytes) -> None:
    key = Ed25519PrivateKey.from_private_bytes(seed)
    public = key.public_key().public_bytes_raw()
    signature = key.sign(message)
    verifier = Ed25519Verifier()
    assert verify_ed25519(public, message, signature)
    assert verifier.verify(public, message, signature)
    assert not verifier.verify(public, message + b"x", signature)


def test_cache_is_bounded_lru() -> None:
    """The cache holds OpenSSL's key objects, which only a signature libsodium refused needs."""
    verifier = Ed25519Verifier(cache_size=2)
    keys = [Ed25519PrivateKey.generate() for _ in range(3)]
    for key in keys:
        assert not verifier.verify(key.public_key().public_bytes_raw(), b"m", key.sign(b"other"))
    assert len(verifier) == 2
    # Cached keys still verify and still reject wrong signatures.
    last = keys[-1]
    assert verifier.verify(last.public_key().public_bytes_raw(), b"m", last.sign(b"m"))
    assert not verifier.verify(last.public_key().public_bytes_raw(), b"n", last.sign(b"m"))


def test_junk_key_in_cache_never_verifies() -> None:
    verifier = Ed25519Verifier(cache_size=2)
    for _ in range(2):
        assert not verifier.verify(b"\xff" * 32, b"m", b"\x00" * 64)


def test_cache_size_must_be_positive() -> None:
    with pytest.raises(ValueError, match="cache_size"):
        Ed25519Verifier(cache_size=0)


# ---- libsodium first, OpenSSL's verdict: the accepted set is exactly OpenSSL's --------------------------------
L = 2**252 + 27742317777372353535851937790883648493  # the group order
P = 2**255 - 19
IDENTITY = (1).to_bytes(32, "little")
SMALL_ORDER = [  # encodings of points of order 1, 2 and 4 (y = 1, y = -1, y = 0 with either sign)
    IDENTITY,
    (P - 1).to_bytes(32, "little"),
    bytes(32),
    bytes(31) + b"\x80",
]
NON_CANONICAL = [(P + 1).to_bytes(32, "little"), (P + 2).to_bytes(32, "little")]  # y >= p


def openssl_accepts(public_key: bytes, message: bytes, signature: bytes) -> bool:
    try:
        Ed25519PublicKey.from_public_bytes(public_key).verify(signature, message)
    except (InvalidSignature, ValueError):
        return False
    return True


def test_a_small_order_key_openssl_accepts_is_accepted() -> None:
    """The identity as public key, R the identity and S = 0 satisfy the cofactorless equation for any message:
    OpenSSL accepts it, libsodium refuses it. The node's verdict is OpenSSL's (the chain's rule), so it
    accepts; without the OpenSSL fallback it would refuse what every node before accepted."""
    signature = IDENTITY + bytes(32)
    assert openssl_accepts(IDENTITY, b"any message", signature)
    assert not sodium_accepts(IDENTITY, b"any message", signature)
    assert verify_ed25519(IDENTITY, b"any message", signature)
    assert Ed25519Verifier().verify(IDENTITY, b"any message", signature)


def edge_cases() -> list[tuple[bytes, bytes, bytes]]:
    """Small-order and non-canonical keys and R, S = 0, S + L, S = L, valid signatures and their edits."""
    out = [(PUBLIC, MESSAGE, SIGNATURE), (RFC_PUBLIC, b"", RFC_SIGNATURE)]
    s = int.from_bytes(SIGNATURE[32:], "little")
    out += [(PUBLIC, MESSAGE, SIGNATURE[:32] + (s + L).to_bytes(32, "little"))]
    out += [(PUBLIC, MESSAGE, SIGNATURE[:32] + L.to_bytes(32, "little"))]
    for key in SMALL_ORDER + NON_CANONICAL + [PUBLIC]:
        for r in SMALL_ORDER + NON_CANONICAL + [SIGNATURE[:32]]:
            for s_bytes in (bytes(32), SIGNATURE[32:], (1).to_bytes(32, "little")):
                out.append((key, MESSAGE, r + s_bytes))
    return out


def test_the_verdict_is_openssls_on_every_edge_case() -> None:
    seen_refused_by_sodium_only = 0
    for public_key, message, signature in edge_cases():
        want = openssl_accepts(public_key, message, signature)
        if sodium_accepts(public_key, message, signature):
            assert want, (public_key.hex(), signature.hex())  # libsodium never accepts what OpenSSL refuses
        elif want:
            seen_refused_by_sodium_only += 1
        assert verify_ed25519(public_key, message, signature) is want
        assert Ed25519Verifier().verify(public_key, message, signature) is want
    assert seen_refused_by_sodium_only > 0  # the cases that need the fallback are among them


@settings(max_examples=200)
@given(st.binary(min_size=32, max_size=32), st.binary(max_size=200), st.integers(0, 63), st.integers(0, 255))
def test_the_verdict_is_openssls_on_edited_signatures(seed: bytes, message: bytes, at: int, value: int) -> None:
    key = Ed25519PrivateKey.from_private_bytes(seed)
    public = key.public_key().public_bytes_raw()
    signature = bytearray(key.sign(message))
    signature[at] = value
    edited = bytes(signature)
    want = openssl_accepts(public, message, edited)
    assert not sodium_accepts(public, message, edited) or want
    assert verify_ed25519(public, message, edited) is want
