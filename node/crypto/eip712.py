"""The chain's EIP-712 domain and custody structs.

Custody signatures (secp256k1 wallets, P-256 keys, WebAuthn passkeys) sign the EIP-712 digest of one of
the structs below, under the domain ``EIP712Domain(string name,string version,uint256 chainId)`` with
name ``"VersionControlChain"``, version ``"1"`` and chainId = the ``NetworkId``.

For every struct there is ``<struct>_digest(...) -> bytes`` (the 32 bytes to sign and verify) and
``<struct>_typed_data(...) -> dict`` (the full typed data in the JSON form of ``eth_signTypedData_v4`` and
eth-account's ``sign_typed_data(full_message=...)``). The digest is computed from that same dict, so a
wallet signing the dict and the node verifying the digest cannot disagree.

The generic encoder lives in ``eip712_encoding``; its public functions are re-exported here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import IntEnum
from types import MappingProxyType
from typing import Any

from node.crypto.address import to_checksum_address
from node.crypto.eip712_encoding import (
    DOMAIN_TYPE,
    TypedDataError,
    domain_separator,
    encode_data,
    encode_type,
    hash_struct,
    type_hash,
    typed_data_digest,
)

__all__ = [
    "DOMAIN_NAME",
    "DOMAIN_TYPE",
    "DOMAIN_VERSION",
    "KEYCHAIN_AUTHORIZE",
    "KEYCHAIN_REVOKE",
    "SIGNER_ADD",
    "SIGNER_REMOVE",
    "STRUCT_FIELDS",
    "VERIFICATION_CLAIM",
    "NetworkId",
    "TypedDataError",
    "chain_domain",
    "chain_domain_separator",
    "domain_separator",
    "encode_data",
    "encode_type",
    "full_message_digest",
    "hash_struct",
    "keychain_authorize_digest",
    "keychain_authorize_typed_data",
    "keychain_revoke_digest",
    "keychain_revoke_typed_data",
    "signer_add_digest",
    "signer_add_typed_data",
    "signer_remove_digest",
    "signer_remove_typed_data",
    "type_hash",
    "typed_data_digest",
    "verification_claim_digest",
    "verification_claim_typed_data",
]

DOMAIN_NAME = "VersionControlChain"
DOMAIN_VERSION = "1"

SIGNER_ADD = "SignerAdd"
SIGNER_REMOVE = "SignerRemove"
KEYCHAIN_AUTHORIZE = "KeychainAuthorize"
KEYCHAIN_REVOKE = "KeychainRevoke"
VERIFICATION_CLAIM = "VerificationClaim"

Fields = tuple[tuple[str, str], ...]

_DOMAIN_FIELDS: Fields = (("name", "string"), ("version", "string"), ("chainId", "uint256"))

STRUCT_FIELDS: Mapping[str, Fields] = MappingProxyType(
    {
        SIGNER_ADD: (
            ("owner", "address"),
            ("key", "bytes32"),
            ("scope", "uint8"),
            ("allowedProjects", "bytes32[]"),
            ("nonce", "uint64"),
            ("validAfter", "uint64"),
            ("deadline", "uint64"),
        ),
        SIGNER_REMOVE: (
            ("owner", "address"),
            ("key", "bytes32"),
            ("nonce", "uint64"),
            ("validAfter", "uint64"),
            ("deadline", "uint64"),
        ),
        KEYCHAIN_AUTHORIZE: (
            ("owner", "address"),
            ("keyId", "address"),
            ("signatureType", "uint8"),
            ("publicKey", "bytes"),
            ("admin", "bool"),
            ("expiresAt", "uint64"),
            ("nonce", "uint64"),
            ("validAfter", "uint64"),
            ("deadline", "uint64"),
        ),
        KEYCHAIN_REVOKE: (
            ("owner", "address"),
            ("keyId", "address"),
            ("nonce", "uint64"),
            ("validAfter", "uint64"),
            ("deadline", "uint64"),
        ),
        VERIFICATION_CLAIM: (
            ("owner", "address"),
            ("verifiedAddress", "address"),
            ("timestamp", "uint64"),
        ),
    }
)
"""Member lists of the custody structs, in signing order (read-only)."""


class NetworkId(IntEnum):
    """The EIP-712 ``chainId`` of each network."""

    MAINNET = 1
    TESTNET = 2
    DEVNET = 3


def _type_json(fields: Fields) -> list[dict[str, str]]:
    return [{"name": name, "type": kind} for name, kind in fields]


def chain_domain(network: int) -> dict[str, Any]:
    """The domain object of ``network``; raises ``ValueError`` for an unknown network id."""
    return {"name": DOMAIN_NAME, "version": DOMAIN_VERSION, "chainId": int(NetworkId(network))}


def chain_domain_separator(network: int) -> bytes:
    """``hashStruct(EIP712Domain)`` of ``network``."""
    return domain_separator(chain_domain(network), {DOMAIN_TYPE: _type_json(_DOMAIN_FIELDS)})


def _typed_data(network: int, primary_type: str, message: dict[str, Any]) -> dict[str, Any]:
    return {
        "types": {
            DOMAIN_TYPE: _type_json(_DOMAIN_FIELDS),
            primary_type: _type_json(STRUCT_FIELDS[primary_type]),
        },
        "primaryType": primary_type,
        "domain": chain_domain(network),
        "message": message,
    }


def full_message_digest(full_message: Mapping[str, Any]) -> bytes:
    """Digest of typed data in the ``{"types", "primaryType", "domain", "message"}`` JSON form."""
    try:
        return typed_data_digest(
            full_message["domain"],
            full_message["primaryType"],
            full_message["types"],
            full_message["message"],
        )
    except KeyError as missing:
        raise TypedDataError(f"typed data lacks {missing}") from None


def _address(value: bytes, what: str) -> str:
    try:
        return to_checksum_address(value)
    except ValueError as error:
        raise TypedDataError(f"{what}: {error}") from None


def _hex(value: bytes) -> str:
    if not isinstance(value, bytes | bytearray | memoryview):
        raise TypedDataError(f"expected bytes, got {type(value).__name__}")
    return "0x" + bytes(value).hex()


def signer_add_typed_data(
    network: int,
    *,
    owner: bytes,
    key: bytes,
    scope: int,
    allowed_projects: Sequence[bytes],
    nonce: int,
    valid_after: int,
    deadline: int,
) -> dict[str, Any]:
    """Typed data authorizing the delegated Ed25519 ``key`` (32 bytes) for ``owner``."""
    return _typed_data(
        network,
        SIGNER_ADD,
        {
            "owner": _address(owner, "owner"),
            "key": _hex(key),
            "scope": scope,
            "allowedProjects": [_hex(project) for project in allowed_projects],
            "nonce": nonce,
            "validAfter": valid_after,
            "deadline": deadline,
        },
    )


def signer_add_digest(
    network: int,
    *,
    owner: bytes,
    key: bytes,
    scope: int,
    allowed_projects: Sequence[bytes],
    nonce: int,
    valid_after: int,
    deadline: int,
) -> bytes:
    """EIP-712 digest of ``SignerAdd``."""
    typed = signer_add_typed_data(
        network,
        owner=owner,
        key=key,
        scope=scope,
        allowed_projects=allowed_projects,
        nonce=nonce,
        valid_after=valid_after,
        deadline=deadline,
    )
    return full_message_digest(typed)


def signer_remove_typed_data(
    network: int, *, owner: bytes, key: bytes, nonce: int, valid_after: int, deadline: int
) -> dict[str, Any]:
    """Typed data removing the delegated Ed25519 ``key`` of ``owner``."""
    return _typed_data(
        network,
        SIGNER_REMOVE,
        {
            "owner": _address(owner, "owner"),
            "key": _hex(key),
            "nonce": nonce,
            "validAfter": valid_after,
            "deadline": deadline,
        },
    )


def signer_remove_digest(
    network: int, *, owner: bytes, key: bytes, nonce: int, valid_after: int, deadline: int
) -> bytes:
    """EIP-712 digest of ``SignerRemove``."""
    typed = signer_remove_typed_data(
        network, owner=owner, key=key, nonce=nonce, valid_after=valid_after, deadline=deadline
    )
    return full_message_digest(typed)


def keychain_authorize_typed_data(
    network: int,
    *,
    owner: bytes,
    key_id: bytes,
    signature_type: int,
    public_key: bytes,
    admin: bool,
    expires_at: int,
    nonce: int,
    valid_after: int,
    deadline: int,
) -> dict[str, Any]:
    """Typed data adding custody key ``key_id`` (20-byte address) to ``owner``'s keychain."""
    return _typed_data(
        network,
        KEYCHAIN_AUTHORIZE,
        {
            "owner": _address(owner, "owner"),
            "keyId": _address(key_id, "keyId"),
            "signatureType": signature_type,
            "publicKey": _hex(public_key),
            "admin": admin,
            "expiresAt": expires_at,
            "nonce": nonce,
            "validAfter": valid_after,
            "deadline": deadline,
        },
    )


def keychain_authorize_digest(
    network: int,
    *,
    owner: bytes,
    key_id: bytes,
    signature_type: int,
    public_key: bytes,
    admin: bool,
    expires_at: int,
    nonce: int,
    valid_after: int,
    deadline: int,
) -> bytes:
    """EIP-712 digest of ``KeychainAuthorize``."""
    typed = keychain_authorize_typed_data(
        network,
        owner=owner,
        key_id=key_id,
        signature_type=signature_type,
        public_key=public_key,
        admin=admin,
        expires_at=expires_at,
        nonce=nonce,
        valid_after=valid_after,
        deadline=deadline,
    )
    return full_message_digest(typed)


def keychain_revoke_typed_data(
    network: int, *, owner: bytes, key_id: bytes, nonce: int, valid_after: int, deadline: int
) -> dict[str, Any]:
    """Typed data revoking custody key ``key_id`` of ``owner``."""
    return _typed_data(
        network,
        KEYCHAIN_REVOKE,
        {
            "owner": _address(owner, "owner"),
            "keyId": _address(key_id, "keyId"),
            "nonce": nonce,
            "validAfter": valid_after,
            "deadline": deadline,
        },
    )


def keychain_revoke_digest(
    network: int, *, owner: bytes, key_id: bytes, nonce: int, valid_after: int, deadline: int
) -> bytes:
    """EIP-712 digest of ``KeychainRevoke``."""
    typed = keychain_revoke_typed_data(
        network, owner=owner, key_id=key_id, nonce=nonce, valid_after=valid_after, deadline=deadline
    )
    return full_message_digest(typed)


def verification_claim_typed_data(
    network: int, *, owner: bytes, verified_address: bytes, timestamp: int
) -> dict[str, Any]:
    """Typed data signed by the external Ethereum address ``verified_address`` to link it to ``owner``."""
    return _typed_data(
        network,
        VERIFICATION_CLAIM,
        {
            "owner": _address(owner, "owner"),
            "verifiedAddress": _address(verified_address, "verifiedAddress"),
            "timestamp": timestamp,
        },
    )


def verification_claim_digest(network: int, *, owner: bytes, verified_address: bytes, timestamp: int) -> bytes:
    """EIP-712 digest of ``VerificationClaim``."""
    typed = verification_claim_typed_data(network, owner=owner, verified_address=verified_address, timestamp=timestamp)
    return full_message_digest(typed)
