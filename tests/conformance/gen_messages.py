"""Message vectors: canonical encoding, BLAKE3 hash and Ed25519 envelope of every message type.

Every vector is a message the scenario chain committed (tests/conformance/scenario.py). Custody-authorized
messages (and VERIFICATION_ADD's claim) also carry the EIP-712 typed data and digest their `auth` signs.
"""

from __future__ import annotations

from typing import Any

from chain.v1 import message_pb2 as pb
from node.codec import encode_data
from node.crypto.custody import CustodySignature, verify_custody_signature
from node.crypto.errors import CustodySignatureError
from node.sdk.authority import Authority
from tests.conformance import fixed
from tests.conformance.fixed import h
from tests.conformance.gen_custody import POLICY, struct_parts, typed_data_of
from tests.conformance.scenario import ACTOR_NAMES, Scenario

TYPE_NAMES = {number: name for name, number in pb.MessageType.items()}
ED25519_NAMES = (*(f"{n}/ed25519" for n in ACTOR_NAMES), "alice/agent", "stranger", "carol/other")


def _seeds() -> dict[bytes, str]:
    return {fixed.ed25519(name).public_key: name for name in ED25519_NAMES}


def _custody(data: pb.MessageData) -> dict[str, Any] | None:
    typed = typed_data_of(data)
    if typed is None:
        return None
    parts = struct_parts(typed)
    digest = fixed.unhex(parts["digest"])
    body_name = data.WhichOneof("body")
    if body_name == "verification_add":
        sig = CustodySignature(signature_type=1, signature=bytes(data.verification_add.claim_signature))
    else:
        s = getattr(data, body_name or "").auth.signature
        sig = CustodySignature(
            int(s.signature_type),
            bytes(s.signature),
            bytes(s.public_key),
            bytes(s.authenticator_data),
            bytes(s.client_data_json),
        )
    out = {"typed_data": typed, "digest": parts["digest"]}
    try:
        return out | {"key_id": h(verify_custody_signature(sig, digest, webauthn_policy=POLICY))}
    except CustodySignatureError as exc:
        return out | {"key_id": None, "signature_error": exc.reason.value}


def vector(label: str, msg: pb.Message, *, block: tuple[int, int] | None = None, note: str = "") -> dict[str, Any]:
    names = _seeds()
    out: dict[str, Any] = {
        "name": label,
        "type": TYPE_NAMES.get(msg.data.type, ""),
        "type_number": int(msg.data.type),
    }
    if note:
        out["note"] = note
    if block is not None:
        out["block"], out["block_time"] = block
    out |= {
        "message": fixed.proto_json(msg),
        "data_bytes": h(encode_data(msg.data)),
        "hash": h(msg.hash),
        "signer": h(msg.signer),
        "signer_key": names.get(bytes(msg.signer), ""),
        "signer_seed": h(fixed.seed(names[bytes(msg.signer)])) if bytes(msg.signer) in names else "",
        "signature": h(msg.signature),
    }
    custody = _custody(msg.data)
    if custody is not None:
        out["custody"] = custody
    return out


def family(s: Scenario) -> dict[str, Any]:
    authority = Authority(s.h.authority.wallet, s.h.authority.key)
    return {
        "family": "messages",
        "version": fixed.VERSION,
        "description": (
            "Every message type, as committed by a small devnet chain: the Message in the protobuf JSON mapping "
            "(the REST write format), data_bytes = the canonical (deterministic) protobuf encoding of "
            "MessageData, hash = BLAKE3-256(data_bytes), signature = Ed25519(signer seed, hash). Custody-"
            "authorized messages and VERIFICATION_ADD carry the EIP-712 typed data their custody signature "
            "(or claim) signs and the address that signed it. See docs/protocol.md and docs/conformance.md."
        ),
        "network": pb.Network.Name(fixed.NETWORK),
        "genesis": {
            "network": pb.Network.Name(fixed.NETWORK),
            "storage_authorities": [h(s.h.authority.address)],
            "webauthn_rp_id": POLICY.rp_id,
            "genesis_time_ms": fixed.T0 * 1000,
        },
        "devnet_authority_file": authority.to_json(),
        "vectors": [vector(r.label, r.message, block=(r.block, r.block_time), note=r.note) for r in s.recorded],
    }
