"""A storage authority's keys (the devnet writes them to DATA_DIR/devnet-authority.json)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from chain.v1 import message_pb2 as pb
from node.sdk.keys import Ed25519Key, Secp256k1Key
from node.sdk.messages import MessageBuilder


@dataclass(frozen=True)
class Authority:
    wallet: Secp256k1Key
    key: Ed25519Key

    def to_json(self) -> dict[str, str]:
        return {
            "address": "0x" + self.wallet.address.hex(),
            "wallet_private_key": self.wallet.private_bytes().hex(),
            "ed25519_private_key": self.key.private_bytes().hex(),
        }

    @classmethod
    def load(cls, path: Path) -> Authority:
        doc = json.loads(path.read_text())
        return cls(
            Secp256k1Key.from_private_bytes(bytes.fromhex(doc["wallet_private_key"])),
            Ed25519Key.from_private_bytes(bytes.fromhex(doc["ed25519_private_key"])),
        )

    def bootstrap_message(self) -> pb.Message:
        b = MessageBuilder(self.wallet.address, self.key)
        return b.signer_add(self.wallet, 0)
