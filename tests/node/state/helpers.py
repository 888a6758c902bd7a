"""Shared helpers for the state-transition tests (on top of tests.harness)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from chain.v1 import block_pb2
from chain.v1 import message_pb2 as pb
from node.chain import Chain
from node.crypto import eip712
from node.sdk.keys import Ed25519Key, P256Key, Secp256k1Key, WebAuthnKey
from node.sdk.messages import CustodyKey, MessageBuilder, custody_signature_proto, sign_message
from node.state.transition import BlockOutput
from node.storage import chainlog, schema
from tests.harness import Actor, Harness

WEBAUTHN_ORIGIN = "http://localhost:8080"


def webauthn_key(rp_id: str = "localhost", origin: str = WEBAUTHN_ORIGIN) -> WebAuthnKey:
    return WebAuthnKey.generate(rp_id=rp_id, origin=origin)


def p256_key() -> P256Key:
    return P256Key.generate()


def created_id(out: BlockOutput, index: int = 0) -> bytes:
    """The id of what the index-th applied message created (project, merge request, grant)."""
    return bytes(out.applied[index].message.hash)


def edit(msg: pb.Message, key: Ed25519Key, change: Callable[[pb.MessageData], Any]) -> pb.Message:
    """A copy of `msg` whose data went through `change`, re-signed (new hash) by `key`."""
    data = pb.MessageData()
    data.CopyFrom(msg.data)
    change(data)
    return sign_message(data, key)


def edit_body(msg: pb.Message, key: Ed25519Key, /, **fields: Any) -> pb.Message:
    """A copy of `msg` with body attributes replaced, re-signed by `key`."""

    def change(data: pb.MessageData) -> None:
        body = getattr(data, str(data.WhichOneof("body")))
        for name, value in fields.items():
            if isinstance(value, list):
                del getattr(body, name)[:]
                getattr(body, name).extend(value)
            else:
                setattr(body, name, value)

    return edit(msg, key, change)


def builder(h: Harness, owner: bytes, key: Ed25519Key) -> MessageBuilder:
    return MessageBuilder(owner, key, clock=h.clock)


def add_key(
    h: Harness, actor: Actor, scope: pb.KeyScope.ValueType, allowed_projects: Sequence[bytes] = ()
) -> MessageBuilder:
    """Register another delegated key for `actor`; returns a builder signing with it."""
    key = Ed25519Key.generate()
    h.commit(
        actor.b.signer_add(
            actor.wallet, actor.next_nonce(), key=key, scope=scope, allowed_projects=list(allowed_projects)
        )
    )
    return builder(h, actor.address, key)


def custody_auth(custody: CustodyKey, digest: bytes, nonce: int, valid_after: int, deadline: int) -> pb.CustodyAuth:
    return pb.CustodyAuth(
        signature=custody_signature_proto(custody.custody_signature(digest)),
        nonce=nonce,
        valid_after=valid_after,
        deadline=deadline,
    )


def signer_add_window(
    actor: Actor,
    custody: CustodyKey,
    nonce: int,
    *,
    timestamp: int,
    valid_after: int,
    deadline: int,
    key: Ed25519Key | None = None,
    scope: pb.KeyScope.ValueType = pb.KEY_SCOPE_SIGNING,
) -> pb.Message:
    """A correctly signed SIGNER_ADD whose custody validity window is chosen by the caller."""
    new_key = key or Ed25519Key.generate()
    digest = eip712.signer_add_digest(
        pb.NETWORK_DEVNET,
        owner=actor.address,
        key=new_key.public_key,
        scope=scope,
        allowed_projects=[],
        nonce=nonce,
        valid_after=valid_after,
        deadline=deadline,
    )
    body = pb.SignerAddBody(
        key=new_key.public_key, scope=scope, auth=custody_auth(custody, digest, nonce, valid_after, deadline)
    )
    data = pb.MessageData(
        type=pb.MESSAGE_TYPE_SIGNER_ADD,
        owner_address=actor.address,
        timestamp=timestamp,
        network=pb.NETWORK_DEVNET,
        signer_add=body,
    )
    return sign_message(data, new_key)


def verification_claim(
    owner: bytes, verified: Secp256k1Key, timestamp: int, *, signer: Secp256k1Key | None = None
) -> bytes:
    """The 65-byte claim that `verified` belongs to `owner` (signed by `signer`, default `verified`)."""
    digest = eip712.verification_claim_digest(
        pb.NETWORK_DEVNET, owner=owner, verified_address=verified.address, timestamp=timestamp
    )
    return (signer or verified).sign_digest(digest)


def stored_block(chain: Chain, number: int) -> block_pb2.Block:
    with chain.read() as (view, _):
        block = chainlog.read_block(view, number)
    assert block is not None, f"no block {number}"
    return block


def follower(h: Harness, path: Path) -> Chain:
    """A second chain with the harness's genesis parameters, fed every block the harness committed."""
    chain = Chain.open(path, h.chain.params, sync=False)
    catch_up(chain, h.chain)
    return chain


def catch_up(chain: Chain, source: Chain) -> None:
    for number in range(chain.height + 1, source.height + 1):
        chain.commit(chain.apply(stored_block(source, number)))


def root_of(chain: Chain) -> bytes:
    return bytes(chain.head().header.state_root)


def tree_state(chain: Chain) -> dict[bytes, bytes]:
    """Every public-state (Merkle-tree) record of a chain."""
    with chain.read() as (view, _):
        return {k: v for k, v in view.scan(b"") if schema.in_tree(k)}
