"""Wallet interop: eth-account signs our typed data, our verifier accepts it and recovers the same address."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from eth_account import Account
from eth_account.messages import _hash_eip191_message, encode_typed_data

from node.crypto import eip712
from node.crypto.custody import CustodySignature, SignatureType, verify_custody_signature
from node.crypto.eip712 import NetworkId
from tests.node.crypto.custody_helpers import POLICY, assert_rejected, flip

PRIVATE_KEY = bytes.fromhex("4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318")
ACCOUNT = Account.from_key(PRIVATE_KEY)
OWNER = bytes.fromhex(ACCOUNT.address[2:])
NETWORK = NetworkId.TESTNET

StructCase = tuple[Callable[..., dict[str, Any]], Callable[..., bytes], dict[str, Any]]

CASES: dict[str, StructCase] = {
    "SignerAdd": (
        eip712.signer_add_typed_data,
        eip712.signer_add_digest,
        dict(
            owner=OWNER,
            key=bytes(range(32)),
            scope=2,
            allowed_projects=[b"\xaa" * 32, b"\xbb" * 32],
            nonce=7,
            valid_after=1_700_000_000,
            deadline=1_700_003_600,
        ),
    ),
    "SignerRemove": (
        eip712.signer_remove_typed_data,
        eip712.signer_remove_digest,
        dict(owner=OWNER, key=bytes(range(32)), nonce=8, valid_after=1_700_000_000, deadline=1_700_003_600),
    ),
    "KeychainAuthorize": (
        eip712.keychain_authorize_typed_data,
        eip712.keychain_authorize_digest,
        dict(
            owner=OWNER,
            key_id=b"\x42" * 20,
            signature_type=SignatureType.WEBAUTHN,
            public_key=b"\x04" + b"\x01" * 64,
            admin=True,
            expires_at=0,
            nonce=9,
            valid_after=1_700_000_000,
            deadline=1_700_003_600,
        ),
    ),
    "KeychainRevoke": (
        eip712.keychain_revoke_typed_data,
        eip712.keychain_revoke_digest,
        dict(owner=OWNER, key_id=b"\x42" * 20, nonce=10, valid_after=1_700_000_000, deadline=1_700_003_600),
    ),
    "VerificationClaim": (
        eip712.verification_claim_typed_data,
        eip712.verification_claim_digest,
        dict(owner=b"\x99" * 20, verified_address=OWNER, timestamp=1_700_000_000),
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_eth_account_signature_is_accepted(name: str) -> None:
    typed_data, digest_of, kwargs = CASES[name]
    full_message = typed_data(NETWORK, **kwargs)
    assert full_message["primaryType"] == name
    digest = digest_of(NETWORK, **kwargs)

    assert digest == bytes(_hash_eip191_message(encode_typed_data(full_message=full_message)))

    signed = Account.sign_typed_data(PRIVATE_KEY, full_message=full_message)
    assert bytes(signed.message_hash) == digest
    signature = CustodySignature(signature_type=SignatureType.SECP256K1, signature=bytes(signed.signature))
    address = verify_custody_signature(signature, digest, webauthn_policy=POLICY)
    assert address == OWNER
    assert "0x" + address.hex() == ACCOUNT.address.lower()


@pytest.mark.parametrize("name", sorted(CASES))
def test_signature_for_another_network_does_not_verify_here(name: str) -> None:
    typed_data, digest_of, kwargs = CASES[name]
    signed = Account.sign_typed_data(PRIVATE_KEY, full_message=typed_data(NetworkId.MAINNET, **kwargs))
    signature = CustodySignature(signature_type=SignatureType.SECP256K1, signature=bytes(signed.signature))
    assert_rejected(signature, digest_of(NETWORK, **kwargs), OWNER)


@pytest.mark.parametrize("name", sorted(CASES))
def test_tampered_eth_account_signature_is_rejected(name: str) -> None:
    typed_data, digest_of, kwargs = CASES[name]
    digest = digest_of(NETWORK, **kwargs)
    signed = bytes(Account.sign_typed_data(PRIVATE_KEY, full_message=typed_data(NETWORK, **kwargs)).signature)
    for position in range(len(signed)):
        tampered = CustodySignature(signature_type=SignatureType.SECP256K1, signature=flip(signed, position, 0x01))
        assert_rejected(tampered, digest, OWNER)
    for position in range(len(digest)):
        good = CustodySignature(signature_type=SignatureType.SECP256K1, signature=signed)
        assert_rejected(good, flip(digest, position, 0x01), OWNER)
