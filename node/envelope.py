"""Signed message envelopes: the pieces both clients and the node's devnet genesis build messages from.

- ``sign_message`` wraps ``MessageData`` in a ``Message`` (hash over the canonical encoding, Ed25519
  signature, ``data_bytes`` set).
- ``custody_auth`` asks a custody key (wallet or passkey) to sign an EIP-712 digest over a validity window.
- ``signer_add_message`` is the custody-authorized SIGNER_ADD that registers a delegated key; the SDK's
  ``MessageBuilder.signer_add`` and the devnet authority's bootstrap (node.authority) both call it.

The message builders for every other type are client code (node.sdk.messages).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from chain.v1 import message_pb2 as pb
from node.codec import encode_data, message_hash
from node.crypto import eip712
from node.crypto.custody import CustodySignature
from node.crypto.signers import Ed25519Key

CUSTODY_WINDOW = 600
CUSTODY_CLOCK_SKEW = 60


class CustodyKey(Protocol):
    """A wallet or passkey: Secp256k1Key, P256Key or WebAuthnKey."""

    signature_type: Any

    @property
    def address(self) -> bytes: ...

    def custody_signature(self, digest: bytes) -> CustodySignature: ...


def custody_signature_proto(sig: CustodySignature) -> pb.CustodySignature:
    return pb.CustodySignature(
        signature_type=int(sig.signature_type),
        signature=sig.signature,
        public_key=sig.public_key,
        authenticator_data=sig.authenticator_data,
        client_data_json=sig.client_data_json,
    )


def sign_message(data: pb.MessageData, signer: Ed25519Key) -> pb.Message:
    digest = message_hash(data)
    return pb.Message(
        data=data, hash=digest, signature=signer.sign(digest), signer=signer.public_key, data_bytes=encode_data(data)
    )


def custody_auth(custody: CustodyKey, nonce: int, now: int, digest_for: Callable[[int, int], bytes]) -> pb.CustodyAuth:
    """``custody`` signs ``digest_for(valid_after, deadline)``; the window opens a minute before ``now``."""
    valid_after = now - CUSTODY_CLOCK_SKEW
    deadline = valid_after + CUSTODY_WINDOW
    sig = custody.custody_signature(digest_for(valid_after, deadline))
    return pb.CustodyAuth(
        signature=custody_signature_proto(sig), nonce=nonce, valid_after=valid_after, deadline=deadline
    )


def signer_add_message(
    owner: bytes,
    custody: CustodyKey,
    nonce: int,
    key: Ed25519Key,
    *,
    network: pb.Network.ValueType,
    now: int,
    scope: pb.KeyScope.ValueType = pb.KEY_SCOPE_OWNER,
    allowed_projects: Sequence[bytes] = (),
    timestamp: int | None = None,
) -> pb.Message:
    """Register ``key`` as a delegated key of ``owner``, authorized by ``custody``; ``key`` signs the envelope."""
    auth = custody_auth(
        custody,
        nonce,
        now,
        lambda va, dl: eip712.signer_add_digest(
            network,
            owner=owner,
            key=key.public_key,
            scope=scope,
            allowed_projects=list(allowed_projects),
            nonce=nonce,
            valid_after=va,
            deadline=dl,
        ),
    )
    body = pb.SignerAddBody(key=key.public_key, scope=scope, allowed_projects=allowed_projects, auth=auth)
    data = pb.MessageData(
        type=pb.MESSAGE_TYPE_SIGNER_ADD,
        owner_address=owner,
        timestamp=timestamp or now,
        network=network,
        signer_add=body,
    )
    return sign_message(data, key)
