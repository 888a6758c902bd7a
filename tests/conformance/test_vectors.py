"""The committed conformance vectors (tests/conformance/v1) hold against the project's own verification code.

And they are current: regenerating them gives the committed files byte for byte.
"""

from __future__ import annotations

import json
from collections import defaultdict
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from google.protobuf.json_format import ParseDict

from chain.v1 import message_pb2 as pb
from chain.v1 import proof_pb2
from node.chain import Chain
from node.codec import check_envelope, encode_data
from node.crypto import eip712
from node.crypto.custody import CustodySignature, verify_custody_signature
from node.crypto.ed25519 import Ed25519Verifier
from node.crypto.webauthn import WebAuthnPolicy
from node.errors import Reason
from node.params import ChainParams
from node.sdk.keys import Ed25519Key, P256Key, Secp256k1Key
from node.sdk.proofs import verify_operation_proof, verify_storage_quota_proof
from tests.conformance import generate
from tests.conformance.scenario import ConformanceHarness

VECTORS = generate.VECTORS_DIR


@cache
def load(family: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((VECTORS / f"{family}.json").read_text(encoding="utf-8"))
    assert doc["family"] == family and doc["version"] == 1
    return doc


def b(text: str) -> bytes:
    return bytes.fromhex(text.removeprefix("0x"))


def message_of(vector: dict[str, Any]) -> pb.Message:
    msg = pb.Message()
    ParseDict(vector["message"], msg)
    return msg


def custody_of(sig: dict[str, Any]) -> CustodySignature:
    return CustodySignature(
        signature_type=sig["signature_type"],
        signature=b(sig["signature"]),
        public_key=b(sig["public_key"]),
        authenticator_data=b(sig["authenticator_data"]),
        client_data_json=sig["client_data_json"].encode(),
    )


def test_committed_vectors_are_current() -> None:
    """Regenerating gives byte-identical files (run `python -m tests.conformance.generate` after a change)."""
    fresh = generate.render()
    committed = {p.name: p.read_text(encoding="utf-8") for p in sorted(VECTORS.glob("*.json"))}
    assert sorted(committed) == sorted(fresh)
    stale = [name for name, text in fresh.items() if committed[name] != text]
    assert stale == [], f"stale vectors {stale}: run python -m tests.conformance.generate"


def test_every_message_type_has_a_vector() -> None:
    types = {v["type"] for v in load("messages")["vectors"]}
    assert types == {name for name, number in pb.MessageType.items() if number}


@pytest.mark.parametrize("vector", load("messages")["vectors"], ids=lambda v: v["name"])
def test_message_encoding_hash_and_envelope(vector: dict[str, Any]) -> None:
    msg = message_of(vector)
    assert encode_data(msg.data).hex() == vector["data_bytes"][2:] == msg.data_bytes.hex()
    assert check_envelope(msg, Ed25519Verifier()).hex() == vector["hash"][2:]
    key = Ed25519Key.from_private_bytes(b(vector["signer_seed"]))
    assert key.public_key == msg.signer == b(vector["signer"])
    assert key.sign(msg.hash) == msg.signature == b(vector["signature"])
    if msg.data.type == pb.MESSAGE_TYPE_SIGNER_ADD:
        assert msg.signer == msg.data.signer_add.key  # SIGNER_ADD is signed by the key it adds


@pytest.mark.parametrize("vector", [v for v in load("messages")["vectors"] if "custody" in v], ids=lambda v: v["name"])
def test_message_custody_signature(vector: dict[str, Any]) -> None:
    msg, custody = message_of(vector), vector["custody"]
    digest = eip712.full_message_digest(custody["typed_data"])
    assert digest == b(custody["digest"])
    body = getattr(msg.data, msg.data.WhichOneof("body") or "")
    if msg.data.type == pb.MESSAGE_TYPE_VERIFICATION_ADD:
        assert custody["typed_data"]["message"]["timestamp"] == msg.data.timestamp  # the claim's timestamp
        sig = CustodySignature(signature_type=1, signature=bytes(body.claim_signature))
    else:
        s = body.auth.signature
        sig = CustodySignature(s.signature_type, s.signature, s.public_key, s.authenticator_data, s.client_data_json)
        assert custody["typed_data"]["message"]["nonce"] == body.auth.nonce
    policy = WebAuthnPolicy(rp_id=load("messages")["genesis"]["webauthn_rp_id"])
    assert verify_custody_signature(sig, digest, webauthn_policy=policy) == b(custody["key_id"])


def test_messages_replay_to_the_proofs_root(tmp_path: Path) -> None:
    """Applying the message vectors block by block on a fresh chain accepts all and ends on the proofs' root."""
    doc = load("messages")
    genesis = doc["genesis"]
    params = ChainParams(
        network=pb.Network.Value(genesis["network"]),
        storage_authorities=frozenset(b(a) for a in genesis["storage_authorities"]),
        webauthn_rp_id=genesis["webauthn_rp_id"],
        genesis_time_ms=genesis["genesis_time_ms"],
    )
    blocks: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for v in doc["vectors"]:
        blocks[v["block"]].append(v)
    chain = Chain.open(tmp_path / "replay", params)
    try:
        for number in sorted(blocks):
            out = chain.build(
                blocks[number][0]["block_time"] * 1000, [message_of(v) for v in blocks[number]], verify=True
            )
            assert out.block.header.number == number
            assert [d.error.reason for d in out.dropped] == []
            chain.commit(out)
        head = chain.head().header
    finally:
        chain.close()
    proofs = load("proofs")
    assert head.number == proofs["block_number"]
    assert head.state_root.hex() == proofs["state_root"][2:]


def test_devnet_authority_file_names_the_storage_authority() -> None:
    doc = load("messages")
    authority = doc["devnet_authority_file"]
    wallet = Secp256k1Key.from_private_bytes(b(authority["wallet_private_key"]))
    assert "0x" + wallet.address.hex() == authority["address"] == doc["genesis"]["storage_authorities"][0]
    grant = next(v for v in doc["vectors"] if v["type"] == "MESSAGE_TYPE_STORAGE_GRANT")
    key = Ed25519Key.from_private_bytes(b(authority["ed25519_private_key"]))
    assert grant["signer"] == "0x" + key.public_key.hex()
    assert message_of(grant).data.owner_address == wallet.address


@pytest.mark.parametrize("vector", load("custody")["vectors"], ids=lambda v: v["name"])
def test_custody_digest_and_signatures(vector: dict[str, Any]) -> None:
    typed = vector["typed_data"]
    types, primary, message = typed["types"], typed["primaryType"], typed["message"]
    assert eip712.encode_type(types, primary) == vector["encode_type"]
    assert eip712.type_hash(types, primary) == b(vector["type_hash"])
    assert eip712.domain_separator(typed["domain"], types) == b(vector["domain_separator"])
    assert eip712.hash_struct(types, primary, message) == b(vector["hash_struct"])
    digest = eip712.full_message_digest(typed)
    assert digest == b(vector["digest"])
    policy = WebAuthnPolicy(rp_id=load("custody")["webauthn_policy"]["rp_id"])
    for sig in vector["signatures"]:
        assert verify_custody_signature(custody_of(sig), digest, webauthn_policy=policy) == b(sig["key_id"])
        private = b(sig["private_key"])
        if sig["signature_type"] == 1:
            wallet = Secp256k1Key.from_private_bytes(private)
            assert wallet.sign_digest(digest) == b(sig["signature"])  # RFC 6979: reproducible
            assert wallet.address == b(sig["key_id"])
        else:
            assert P256Key.from_private_bytes(private).public_key == b(sig["public_key"])


@pytest.mark.parametrize("vector", load("proofs")["proofs"], ids=lambda v: v["name"])
def test_proof(vector: dict[str, Any]) -> None:
    proof = proof_pb2.MerkleProof.FromString(b(vector["proof_proto"]))
    assert bytes(proof.key) == b(vector["proof"]["key"]) and proof.depth == vector["proof"]["depth"]
    assert verify_operation_proof(proof, b(vector["root"])) is vector["valid"]


@pytest.mark.parametrize("vector", load("proofs")["storage_quota"], ids=lambda v: v["name"])
def test_storage_quota_proof(vector: dict[str, Any]) -> None:
    bundle = proof_pb2.StorageQuotaProof.FromString(b(vector["bundle_proto"]))
    assert verify_storage_quota_proof(bundle, b(vector["root"])) == vector["active_units"]


def test_rejected_cases(tmp_path: Path) -> None:
    """Each case, applied in order to a fresh devnet chain, is dropped with its reason code (and values)."""
    doc = load("rejected")
    h = ConformanceHarness(tmp_path / "chain")
    assert doc["state"]["registered_signers"][0]["key"] == "0x" + h.authority.key.public_key.hex()
    for case in doc["cases"]:
        msg = pb.Message.FromString(b(case["message_proto"]))
        assert msg == message_of(case), case["name"]  # the JSON form is the same message
        assert h.now == case["block_time"], case["name"]
        err = h.reject(msg, Reason(case["reason"]))
        for name in ("cause", "field"):
            if name in case:
                assert err.values.get(name) == case[name], case["name"]
