"""Client keys: generation, import, addresses, low-S signing, and node-side acceptance."""

from __future__ import annotations

import pytest
from eth_account import Account
from eth_account.messages import _hash_eip191_message, encode_typed_data

from node.crypto import eip712
from node.crypto.custody import SignatureType, custody_key_address, verify_custody_signature
from node.crypto.ecdsa import P256_N, SECP256K1_N, split_raw
from node.crypto.ed25519 import verify_ed25519
from node.crypto.webauthn import WebAuthnPolicy
from node.sdk.keys import Ed25519Key, P256Key, Secp256k1Key, WebAuthnKey

RP_ID = "chain.example"
POLICY = WebAuthnPolicy(rp_id=RP_ID)
DIGEST = bytes(range(32, 64))
ETH_PRIVATE = bytes.fromhex("4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318")


def test_ed25519_sign_and_round_trip() -> None:
    key = Ed25519Key.generate()
    signature = key.sign(b"hello")
    assert len(key.public_key) == 32
    assert len(signature) == 64
    assert verify_ed25519(key.public_key, b"hello", signature)
    again = Ed25519Key.from_private_bytes(key.private_bytes())
    assert again.public_key == key.public_key
    assert again.sign(b"hello") == signature  # Ed25519 is deterministic


def test_secp256k1_matches_ethereum() -> None:
    key = Secp256k1Key.from_private_bytes(ETH_PRIVATE)
    account = Account.from_key(ETH_PRIVATE)
    assert "0x" + key.address.hex() == account.address.lower()
    assert len(key.public_key) == 64
    assert custody_key_address(SignatureType.SECP256K1, key.public_key) == key.address
    assert key.private_bytes() == ETH_PRIVATE


def test_secp256k1_signature_matches_eth_account() -> None:
    key = Secp256k1Key.from_private_bytes(ETH_PRIVATE)
    typed = eip712.verification_claim_typed_data(
        eip712.NetworkId.MAINNET, owner=b"\x01" * 20, verified_address=key.address, timestamp=5
    )
    digest = bytes(_hash_eip191_message(encode_typed_data(full_message=typed)))
    ours = key.sign_digest(digest)
    theirs = bytes(Account.sign_typed_data(ETH_PRIVATE, full_message=typed).signature)
    assert ours == theirs  # both RFC 6979 deterministic, low-S, v in {27, 28}


def test_secp256k1_signatures_are_low_s_with_ethereum_v() -> None:
    key = Secp256k1Key.generate()
    for i in range(50):
        digest = bytes([i]) * 32
        signature = key.sign_digest(digest)
        assert len(signature) == 65
        assert signature[64] in (27, 28)
        assert split_raw(signature[:64]).s <= SECP256K1_N // 2
        assert verify_custody_signature(key.custody_signature(digest), digest, webauthn_policy=POLICY) == key.address


def test_p256_low_s_and_accepted() -> None:
    key = P256Key.generate()
    for i in range(50):
        digest = bytes([i]) * 32
        signature = key.sign_digest(digest)
        assert len(signature) == 64
        assert split_raw(signature).s <= P256_N // 2
        custody = key.custody_signature(digest)
        assert custody.signature_type == SignatureType.P256
        assert custody.public_key == key.public_key
        assert verify_custody_signature(custody, digest, webauthn_policy=POLICY) == key.address


def test_p256_round_trip() -> None:
    key = P256Key.generate()
    again = P256Key.from_private_bytes(key.private_bytes())
    assert again.public_key == key.public_key
    assert again.address == key.address == custody_key_address(SignatureType.P256, key.public_key)


def test_webauthn_key_accepted_and_low_s() -> None:
    key = WebAuthnKey.generate(rp_id=RP_ID)
    for i in range(30):
        digest = bytes([i]) * 32
        custody = key.custody_signature(digest)
        assert custody.signature_type == SignatureType.WEBAUTHN
        assert len(custody.signature) == 64
        assert split_raw(custody.signature).s <= P256_N // 2
        assert verify_custody_signature(custody, digest, webauthn_policy=POLICY) == key.address
    assert key.authenticator.sign_count == 30


def test_webauthn_key_round_trip() -> None:
    key = WebAuthnKey.generate(rp_id=RP_ID)
    again = WebAuthnKey.from_private_bytes(key.private_bytes(), rp_id=RP_ID, origin="https://app.chain.example")
    assert again.address == key.address
    custody = again.custody_signature(DIGEST)
    assert verify_custody_signature(custody, DIGEST, webauthn_policy=POLICY) == key.address


@pytest.mark.parametrize("private_bytes", [b"", b"\x01" * 31, b"\x01" * 33, b"\x00" * 32, b"\xff" * 32])
def test_bad_private_bytes(private_bytes: bytes) -> None:
    for factory in (Secp256k1Key.from_private_bytes, P256Key.from_private_bytes):
        with pytest.raises(ValueError):
            factory(private_bytes)
    if len(private_bytes) != 32:
        with pytest.raises(ValueError):
            Ed25519Key.from_private_bytes(private_bytes)


@pytest.mark.parametrize("digest", [b"", b"\x00" * 31, b"\x00" * 33])
def test_digest_must_be_32_bytes(digest: bytes) -> None:
    with pytest.raises(ValueError, match="digest"):
        Secp256k1Key.generate().sign_digest(digest)
    with pytest.raises(ValueError, match="digest"):
        P256Key.generate().sign_digest(digest)
    with pytest.raises(ValueError, match="digest"):
        WebAuthnKey.generate(rp_id=RP_ID).custody_signature(digest)


def test_reprs_hide_private_keys() -> None:
    keys = (Ed25519Key.generate(), Secp256k1Key.generate(), P256Key.generate(), WebAuthnKey.generate(rp_id=RP_ID))
    for key in keys:
        assert key.private_bytes().hex() not in repr(key)
