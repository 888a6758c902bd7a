"""The generic EIP-712 encoder against the EIP's own example and eth-account, and the custody structs."""

from __future__ import annotations

import json
from typing import Any

import pytest
from eth_account.messages import _hash_eip191_message, encode_typed_data
from hypothesis import given, settings
from hypothesis import strategies as st

from node.crypto import eip712
from node.crypto.eip712 import NetworkId, TypedDataError
from node.crypto.eip712_encoding import (
    domain_separator,
    domain_type_fields,
    encode_data,
    encode_type,
    hash_struct,
    type_hash,
    typed_data_digest,
)
from node.crypto.hashing import keccak256

# The example of EIP-712 itself (Mail / Person) with the values published in the EIP.
MAIL: dict[str, Any] = {
    "types": {
        "EIP712Domain": [
            {"name": "name", "type": "string"},
            {"name": "version", "type": "string"},
            {"name": "chainId", "type": "uint256"},
            {"name": "verifyingContract", "type": "address"},
        ],
        "Person": [{"name": "name", "type": "string"}, {"name": "wallet", "type": "address"}],
        "Mail": [
            {"name": "from", "type": "Person"},
            {"name": "to", "type": "Person"},
            {"name": "contents", "type": "string"},
        ],
    },
    "primaryType": "Mail",
    "domain": {
        "name": "Ether Mail",
        "version": "1",
        "chainId": 1,
        "verifyingContract": "0xCcCCccccCCCCcCCCCCCcCcCccCcCCCcCcccccccC",
    },
    "message": {
        "from": {"name": "Cow", "wallet": "0xCD2a3d9F938E13CD947Ec05AbC7FE734Df8DD826"},
        "to": {"name": "Bob", "wallet": "0xbBbBBBBbbBBBbbbBbbBbbbbBBbBbbbbBbBbbBBbB"},
        "contents": "Hello, Bob!",
    },
}


def eth_account_digest(full_message: dict[str, Any]) -> bytes:
    return bytes(_hash_eip191_message(encode_typed_data(full_message=full_message)))


def test_eip_example_values() -> None:
    types = MAIL["types"]
    assert encode_type(types, "Mail") == "Mail(Person from,Person to,string contents)Person(string name,address wallet)"
    assert type_hash(types, "Mail").hex() == "a0cedeb2dc280ba39b857546d74f5549c3a1d7bdc2dd96bf881f76108e23dac2"
    assert (
        domain_separator(MAIL["domain"], types).hex()
        == "f2cee375fa42b42143804025fc449deafd50cc031ca257e0b194a650a912090f"
    )
    assert (
        hash_struct(types, "Mail", MAIL["message"]).hex()
        == "c52c0ee5d84264471806290a3f2c4cecfc5490626bf912d01f240d7a274b371e"
    )
    digest = typed_data_digest(MAIL["domain"], "Mail", types, MAIL["message"])
    assert digest.hex() == "be609aee343fb3c4b28e1df9e632fca64fcfaede20f02e86244efddf30957bd2"
    assert eip712.full_message_digest(MAIL) == digest


def test_domain_type_is_derived_when_absent() -> None:
    types = {k: v for k, v in MAIL["types"].items() if k != "EIP712Domain"}
    assert typed_data_digest(MAIL["domain"], "Mail", types, MAIL["message"]) == eth_account_digest(MAIL)


CUSTODY_TYPE_STRINGS = {
    "SignerAdd": "SignerAdd(address owner,bytes32 key,uint8 scope,bytes32[] allowedProjects,uint64 nonce,"
    "uint64 validAfter,uint64 deadline)",
    "SignerRemove": "SignerRemove(address owner,bytes32 key,uint64 nonce,uint64 validAfter,uint64 deadline)",
    "KeychainAuthorize": "KeychainAuthorize(address owner,address keyId,uint8 signatureType,bytes publicKey,"
    "bool admin,uint64 expiresAt,uint64 nonce,uint64 validAfter,uint64 deadline)",
    "KeychainRevoke": "KeychainRevoke(address owner,address keyId,uint64 nonce,uint64 validAfter,uint64 deadline)",
    "VerificationClaim": "VerificationClaim(address owner,address verifiedAddress,uint64 timestamp)",
}


@pytest.mark.parametrize(("name", "expected"), sorted(CUSTODY_TYPE_STRINGS.items()))
def test_custody_type_strings(name: str, expected: str) -> None:
    types = {name: [{"name": n, "type": t} for n, t in eip712.STRUCT_FIELDS[name]]}
    assert encode_type(types, name) == expected


def test_domain_and_network_ids() -> None:
    assert [int(n) for n in NetworkId] == [1, 2, 3]
    assert [n.name for n in NetworkId] == ["MAINNET", "TESTNET", "DEVNET"]
    domain = eip712.chain_domain(NetworkId.TESTNET)
    assert domain == {"name": "VersionControlChain", "version": "1", "chainId": 2}
    assert encode_type({"EIP712Domain": domain_type_fields(domain)}, "EIP712Domain") == (
        "EIP712Domain(string name,string version,uint256 chainId)"
    )
    separators = {eip712.chain_domain_separator(n) for n in NetworkId}
    assert len(separators) == 3
    with pytest.raises(ValueError):
        eip712.chain_domain(4)


def test_struct_fields_are_read_only() -> None:
    with pytest.raises(TypeError):
        eip712.STRUCT_FIELDS["SignerAdd"] = ()  # type: ignore[index]


addresses = st.binary(min_size=20, max_size=20)
words = st.binary(min_size=32, max_size=32)
uint64 = st.integers(min_value=0, max_value=2**64 - 1)
uint8 = st.integers(min_value=0, max_value=255)
networks = st.sampled_from(list(NetworkId))


@settings(max_examples=40, deadline=None)
@given(networks, addresses, words, uint8, st.lists(words, max_size=4), uint64, uint64, uint64)
def test_signer_add_matches_eth_account(
    network: int,
    owner: bytes,
    key: bytes,
    scope: int,
    projects: list[bytes],
    nonce: int,
    after: int,
    deadline: int,
) -> None:
    kwargs: dict[str, Any] = dict(
        owner=owner,
        key=key,
        scope=scope,
        allowed_projects=projects,
        nonce=nonce,
        valid_after=after,
        deadline=deadline,
    )
    typed = eip712.signer_add_typed_data(network, **kwargs)
    assert eip712.signer_add_digest(network, **kwargs) == eth_account_digest(typed)


@settings(max_examples=25, deadline=None)
@given(networks, addresses, words, uint64, uint64, uint64)
def test_signer_remove_matches_eth_account(
    network: int, owner: bytes, key: bytes, nonce: int, after: int, deadline: int
) -> None:
    kwargs: dict[str, Any] = dict(owner=owner, key=key, nonce=nonce, valid_after=after, deadline=deadline)
    typed = eip712.signer_remove_typed_data(network, **kwargs)
    assert eip712.signer_remove_digest(network, **kwargs) == eth_account_digest(typed)


@settings(max_examples=40, deadline=None)
@given(
    networks,
    addresses,
    addresses,
    uint8,
    st.binary(max_size=100),
    st.booleans(),
    uint64,
    uint64,
    uint64,
    uint64,
)
def test_keychain_authorize_matches_eth_account(
    network: int,
    owner: bytes,
    key_id: bytes,
    signature_type: int,
    public_key: bytes,
    admin: bool,
    expires_at: int,
    nonce: int,
    after: int,
    deadline: int,
) -> None:
    kwargs: dict[str, Any] = dict(
        owner=owner,
        key_id=key_id,
        signature_type=signature_type,
        public_key=public_key,
        admin=admin,
        expires_at=expires_at,
        nonce=nonce,
        valid_after=after,
        deadline=deadline,
    )
    typed = eip712.keychain_authorize_typed_data(network, **kwargs)
    assert eip712.keychain_authorize_digest(network, **kwargs) == eth_account_digest(typed)


@settings(max_examples=25, deadline=None)
@given(networks, addresses, addresses, uint64, uint64, uint64)
def test_keychain_revoke_matches_eth_account(
    network: int, owner: bytes, key_id: bytes, nonce: int, after: int, deadline: int
) -> None:
    kwargs: dict[str, Any] = dict(owner=owner, key_id=key_id, nonce=nonce, valid_after=after, deadline=deadline)
    typed = eip712.keychain_revoke_typed_data(network, **kwargs)
    assert eip712.keychain_revoke_digest(network, **kwargs) == eth_account_digest(typed)


@settings(max_examples=25, deadline=None)
@given(networks, addresses, addresses, uint64)
def test_verification_claim_matches_eth_account(network: int, owner: bytes, verified: bytes, timestamp: int) -> None:
    typed = eip712.verification_claim_typed_data(network, owner=owner, verified_address=verified, timestamp=timestamp)
    digest = eip712.verification_claim_digest(network, owner=owner, verified_address=verified, timestamp=timestamp)
    assert digest == eth_account_digest(typed)


def test_typed_data_is_json_and_round_trips() -> None:
    typed = eip712.signer_add_typed_data(
        NetworkId.MAINNET,
        owner=b"\x11" * 20,
        key=b"\x22" * 32,
        scope=1,
        allowed_projects=[b"\x33" * 32],
        nonce=0,
        valid_after=10,
        deadline=20,
    )
    reloaded = json.loads(json.dumps(typed))
    assert reloaded["primaryType"] == "SignerAdd"
    assert reloaded["message"]["owner"] == "0x1111111111111111111111111111111111111111"
    assert eip712.full_message_digest(reloaded) == eip712.full_message_digest(typed)


def test_every_field_changes_the_digest() -> None:
    base: dict[str, Any] = dict(
        owner=b"\x01" * 20,
        key_id=b"\x02" * 20,
        signature_type=2,
        public_key=b"\x03" * 64,
        admin=False,
        expires_at=5,
        nonce=6,
        valid_after=7,
        deadline=8,
    )
    reference = eip712.keychain_authorize_digest(NetworkId.DEVNET, **base)
    changed: list[tuple[str, Any]] = [
        ("owner", b"\x09" * 20),
        ("key_id", b"\x09" * 20),
        ("signature_type", 3),
        ("public_key", b"\x03" * 63),
        ("admin", True),
        ("expires_at", 6),
        ("nonce", 7),
        ("valid_after", 8),
        ("deadline", 9),
    ]
    for name, value in changed:
        assert eip712.keychain_authorize_digest(NetworkId.DEVNET, **{**base, name: value}) != reference, name
    assert eip712.keychain_authorize_digest(NetworkId.TESTNET, **base) != reference


SIMPLE = {
    "T": [
        {"name": "a", "type": "address"},
        {"name": "b", "type": "bool"},
        {"name": "u", "type": "uint8"},
        {"name": "w", "type": "bytes32"},
        {"name": "d", "type": "bytes"},
        {"name": "s", "type": "string"},
        {"name": "l", "type": "bytes32[]"},
    ]
}
GOOD: dict[str, Any] = {
    "a": b"\x01" * 20,
    "b": True,
    "u": 255,
    "w": b"\x02" * 32,
    "d": b"",
    "s": "x",
    "l": [],
}


def test_encode_data_layout() -> None:
    encoded = encode_data(SIMPLE, "T", GOOD)
    assert len(encoded) == 7 * 32
    assert encoded[:32] == b"\x00" * 12 + b"\x01" * 20
    assert encoded[32:64] == (1).to_bytes(32, "big")
    assert encoded[64:96] == (255).to_bytes(32, "big")
    assert encoded[96:128] == b"\x02" * 32
    assert encoded[128:160] == keccak256(b"")
    assert encoded[160:192] == keccak256(b"x")
    assert encoded[192:224] == keccak256(b"")


def test_hex_and_native_values_encode_alike() -> None:
    as_hex = {**GOOD, "a": "0x" + "01" * 20, "w": "0x" + "02" * 32, "d": "0x", "u": "0xff"}
    assert encode_data(SIMPLE, "T", as_hex) == encode_data(SIMPLE, "T", GOOD)
    assert encode_data(SIMPLE, "T", {**GOOD, "u": "255"}) == encode_data(SIMPLE, "T", GOOD)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("a", b"\x01" * 19),
        ("a", "0x" + "zz" * 20),
        ("a", 5),
        ("b", 1),
        ("u", 256),
        ("u", -1),
        ("u", True),
        ("u", "nope"),
        ("u", 1.0),
        ("w", b"\x02" * 31),
        ("w", b"\x02" * 33),
        ("d", "not hex"),
        ("s", b"bytes"),
        ("l", b"\x00" * 32),
        ("l", [b"\x00" * 31]),
    ],
)
def test_bad_values_raise(field: str, value: Any) -> None:
    with pytest.raises(TypedDataError):
        encode_data(SIMPLE, "T", {**GOOD, field: value})


def test_missing_and_extra_members_raise() -> None:
    with pytest.raises(TypedDataError, match="missing"):
        encode_data(SIMPLE, "T", {k: v for k, v in GOOD.items() if k != "s"})
    with pytest.raises(TypedDataError, match="undeclared"):
        encode_data(SIMPLE, "T", {**GOOD, "extra": 1})


@pytest.mark.parametrize("bad_type", ["uint7", "uint512", "bytes0", "bytes33", "int8", "Unknown", "uint"])
def test_unsupported_types_raise(bad_type: str) -> None:
    with pytest.raises(TypedDataError):
        encode_data({"T": [{"name": "x", "type": bad_type}]}, "T", {"x": 1})


def test_unknown_struct_and_domain_as_primary_raise() -> None:
    with pytest.raises(TypedDataError):
        type_hash(SIMPLE, "Nope")
    with pytest.raises(TypedDataError):
        typed_data_digest(MAIL["domain"], "EIP712Domain", MAIL["types"], MAIL["domain"])
    with pytest.raises(TypedDataError):
        eip712.full_message_digest({"types": {}, "domain": {}})
    with pytest.raises(TypedDataError):
        domain_separator({"name": "x", "colour": "blue"})


def test_custody_inputs_are_checked() -> None:
    with pytest.raises(TypedDataError):
        eip712.signer_remove_digest(1, owner=b"\x01" * 19, key=b"\x02" * 32, nonce=0, valid_after=0, deadline=0)
    with pytest.raises(TypedDataError):
        eip712.signer_remove_digest(1, owner=b"\x01" * 20, key=b"\x02" * 31, nonce=0, valid_after=0, deadline=0)
    with pytest.raises(TypedDataError):
        eip712.signer_remove_digest(1, owner=b"\x01" * 20, key=b"\x02" * 32, nonce=2**64, valid_after=0, deadline=0)
    with pytest.raises(TypedDataError):
        eip712.keychain_authorize_digest(
            1,
            owner=b"\x01" * 20,
            key_id=b"\x02" * 20,
            signature_type=2,
            public_key=5,  # type: ignore[arg-type]
            admin=False,
            expires_at=0,
            nonce=0,
            valid_after=0,
            deadline=0,
        )


def test_nested_struct_arrays_match_eth_account() -> None:
    types = {
        "EIP712Domain": [{"name": "name", "type": "string"}, {"name": "chainId", "type": "uint256"}],
        "Group": [{"name": "members", "type": "Person[]"}, {"name": "tags", "type": "string[]"}],
        "Person": [{"name": "name", "type": "string"}, {"name": "wallet", "type": "address"}],
    }
    message = {
        "members": [{"name": "a", "wallet": "0x" + "01" * 20}, {"name": "b", "wallet": "0x" + "02" * 20}],
        "tags": ["x", "y"],
    }
    full = {"types": types, "primaryType": "Group", "domain": {"name": "n", "chainId": 9}, "message": message}
    assert encode_type(types, "Group") == "Group(Person[] members,string[] tags)Person(string name,address wallet)"
    assert eip712.full_message_digest(full) == eth_account_digest(full)
