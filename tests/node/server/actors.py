"""Accounts driven over the wire: keys, a builder, and funding from the devnet authority."""

from __future__ import annotations

from dataclasses import dataclass, field

from node.sdk.authority import Authority
from node.sdk.keys import Ed25519Key, Secp256k1Key
from node.sdk.messages import MessageBuilder
from node.sdk.rpc import ChainClient


@dataclass
class RemoteActor:
    wallet: Secp256k1Key = field(default_factory=Secp256k1Key.generate)
    key: Ed25519Key = field(default_factory=Ed25519Key.generate)

    def __post_init__(self) -> None:
        self.b = MessageBuilder(self.wallet.address, self.key)

    @property
    def address(self) -> bytes:
        return self.wallet.address


def authority_builder(authority: Authority) -> MessageBuilder:
    return MessageBuilder(authority.wallet.address, authority.key)


def new_account(client: ChainClient, authority: Authority, units: int = 1) -> RemoteActor:
    actor = RemoteActor()
    client.commit(actor.b.signer_add(actor.wallet, 0), authority_builder(authority).storage_grant(actor.address, units))
    return actor
