"""Custody vectors: the EIP-712 digest of every custody struct and its signature by each custody key type.

Also used by the message vectors: `custody_of(message)` names the struct, typed data and digest a
custody-authorized message (or a VERIFICATION_ADD claim) was signed over.
"""

from __future__ import annotations

from typing import Any

from chain.v1 import message_pb2 as pb
from node.crypto import ecdsa, eip712
from node.crypto.custody import CustodySignature, verify_custody_signature
from node.crypto.webauthn import WebAuthnPolicy
from tests.conformance import fixed
from tests.conformance.fixed import h

POLICY = WebAuthnPolicy(rp_id=fixed.RP_ID)
NONCE, VALID_AFTER, DEADLINE = 7, fixed.T0 - 60, fixed.T0 + 540


def typed_data_of(data: pb.MessageData) -> dict[str, Any] | None:
    """The EIP-712 typed data a custody-authorized message's `auth` signs (or a VERIFICATION_ADD's claim)."""
    net, owner = int(data.network), bytes(data.owner_address)
    body_name = data.WhichOneof("body")
    if body_name == "verification_add":
        claim = data.verification_add
        return eip712.verification_claim_typed_data(
            net, owner=owner, verified_address=bytes(claim.address), timestamp=int(data.timestamp)
        )
    if body_name not in ("signer_add", "signer_remove", "keychain_authorize", "keychain_revoke"):
        return None
    body = getattr(data, body_name)
    window = {"nonce": body.auth.nonce, "valid_after": body.auth.valid_after, "deadline": body.auth.deadline}
    if body_name == "signer_add":
        return eip712.signer_add_typed_data(
            net,
            owner=owner,
            key=bytes(body.key),
            scope=int(body.scope),
            allowed_projects=[bytes(p) for p in body.allowed_projects],
            **window,
        )
    if body_name == "signer_remove":
        return eip712.signer_remove_typed_data(net, owner=owner, key=bytes(body.key), **window)
    if body_name == "keychain_authorize":
        return eip712.keychain_authorize_typed_data(
            net,
            owner=owner,
            key_id=bytes(body.key_id),
            signature_type=int(body.signature_type),
            public_key=bytes(body.public_key),
            admin=bool(body.admin),
            expires_at=int(body.expires_at),
            **window,
        )
    return eip712.keychain_revoke_typed_data(net, owner=owner, key_id=bytes(body.key_id), **window)


def struct_parts(typed: dict[str, Any]) -> dict[str, str]:
    """Every intermediate of the digest, so a mismatch can be located."""
    types, primary = typed["types"], typed["primaryType"]
    return {
        "encode_type": eip712.encode_type(types, primary),
        "type_hash": h(eip712.type_hash(types, primary)),
        "domain_separator": h(eip712.domain_separator(typed["domain"], types)),
        "hash_struct": h(eip712.hash_struct(types, primary, typed["message"])),
        "digest": h(eip712.full_message_digest(typed)),
    }


def _structs() -> list[tuple[str, dict[str, Any]]]:
    alice = fixed.secp256k1("alice/wallet").address
    key = fixed.ed25519("alice/agent").public_key
    passkey = fixed.WebAuthn("alice/passkey")
    projects = [fixed.seed("project/1"), fixed.seed("project/2")]
    net, window = fixed.NETWORK, {"nonce": NONCE, "valid_after": VALID_AFTER, "deadline": DEADLINE}
    return [
        (
            "SignerAdd/scope_owner",
            eip712.signer_add_typed_data(net, owner=alice, key=key, scope=1, allowed_projects=[], **window),
        ),
        (
            "SignerAdd/scope_signing",
            eip712.signer_add_typed_data(net, owner=alice, key=key, scope=2, allowed_projects=[], **window),
        ),
        (
            "SignerAdd/scope_agent_two_projects",
            eip712.signer_add_typed_data(net, owner=alice, key=key, scope=3, allowed_projects=projects, **window),
        ),
        ("SignerRemove", eip712.signer_remove_typed_data(net, owner=alice, key=key, **window)),
        (
            "KeychainAuthorize/webauthn",
            eip712.keychain_authorize_typed_data(
                net,
                owner=alice,
                key_id=passkey.address,
                signature_type=3,
                public_key=passkey.public_key,
                admin=False,
                expires_at=fixed.T0 + 86_400,
                **window,
            ),
        ),
        (
            "KeychainAuthorize/secp256k1_admin",
            eip712.keychain_authorize_typed_data(
                net,
                owner=alice,
                key_id=fixed.secp256k1("alice/second-wallet").address,
                signature_type=1,
                public_key=b"",
                admin=True,
                expires_at=0,
                **window,
            ),
        ),
        ("KeychainRevoke", eip712.keychain_revoke_typed_data(net, owner=alice, key_id=passkey.address, **window)),
        (
            "VerificationClaim",
            eip712.verification_claim_typed_data(
                net, owner=alice, verified_address=fixed.secp256k1("alice/external").address, timestamp=fixed.T0
            ),
        ),
        (
            "SignerRemove/testnet",
            eip712.signer_remove_typed_data(pb.NETWORK_TESTNET, owner=alice, key=key, **window),
        ),
    ]


def signature_json(sig: CustodySignature) -> dict[str, Any]:
    return {
        "signature_type": int(sig.signature_type),
        "signature": h(sig.signature),
        "public_key": h(sig.public_key),
        "authenticator_data": h(sig.authenticator_data),
        "client_data_json": sig.client_data_json.decode(),
    }


def _signatures(digest: bytes, *, claim: bool) -> list[dict[str, Any]]:
    """The digest signed by a wallet, a P-256 key and a passkey (a claim: by the wallet only)."""
    wallet = fixed.secp256k1("alice/custody-wallet")
    signed: list[tuple[str, bytes, CustodySignature, dict[str, Any]]] = [
        ("alice/custody-wallet", wallet.private_bytes(), wallet.custody_signature(digest), {})
    ]
    if not claim:
        p256 = fixed.p256("alice/custody-p256")
        signed.append(("alice/custody-p256", p256.private_bytes(), p256.custody_signature(digest), {}))
        passkey = fixed.WebAuthn("alice/custody-passkey")
        assertion = passkey.assertion(digest)
        der = ecdsa.split_der(assertion.signature)
        webauthn = CustodySignature(
            signature_type=3,
            signature=ecdsa.join_raw(ecdsa.low_s(der, ecdsa.P256_N)),
            public_key=passkey.public_key,
            authenticator_data=assertion.authenticator_data,
            client_data_json=assertion.client_data_json,
        )
        extra = {"authenticator_der_signature": h(assertion.signature), "high_s_normalized": der.s > ecdsa.P256_N // 2}
        signed.append(("alice/custody-passkey", fixed.seed("alice/custody-passkey"), webauthn, extra))
    return [
        {"key": name, "private_key": h(private)}
        | signature_json(sig)
        | extra
        | {"key_id": h(verify_custody_signature(sig, digest, webauthn_policy=POLICY))}
        for name, private, sig, extra in signed
    ]


def family() -> dict[str, Any]:
    vectors = []
    for name, typed in _structs():
        parts = struct_parts(typed)
        digest = fixed.unhex(parts["digest"])
        claim = typed["primaryType"] == eip712.VERIFICATION_CLAIM
        vectors.append({"name": name, "typed_data": typed} | parts | {"signatures": _signatures(digest, claim=claim)})
    return {
        "family": "custody",
        "version": fixed.VERSION,
        "description": (
            "EIP-712 digest of every custody struct (with encodeType, typeHash, domain separator and hashStruct) "
            "and its signature by a secp256k1 wallet (65-byte r|s|v), a P-256 key (64-byte r|s over the digest) "
            "and a WebAuthn passkey (assertion whose challenge is base64url(digest), S normalized); key_id is the "
            "signing key's address. See docs/crypto.md and docs/conformance.md."
        ),
        "webauthn_policy": {"rp_id": POLICY.rp_id, "allowed_origins": sorted(POLICY.allowed_origins)},
        "vectors": vectors,
    }
