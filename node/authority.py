"""A storage authority's keys and the file that holds them (DATA_DIR/devnet-authority.json on a devnet).

The file is JSON with three fields: ``address`` (0x-hex of the wallet's address), ``wallet_private_key``
(the secp256k1 scalar, hex) and ``ed25519_private_key`` (the delegated key's seed, hex). The node writes it
at devnet genesis (node.server.devnet) and bootstraps the chain with ``bootstrap_message``; clients read it
to grant storage (``chainctl account fund --authority``, node.sdk.authority).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

from chain.v1 import message_pb2 as pb
from node.crypto.signers import Ed25519Key, Secp256k1Key
from node.envelope import signer_add_message


@dataclass(frozen=True)
class Authority:
    wallet: Secp256k1Key
    key: Ed25519Key

    @classmethod
    def generate(cls) -> Authority:
        return cls(Secp256k1Key.generate(), Ed25519Key.generate())

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
        """The devnet's first message: SIGNER_ADD of ``key`` (owner scope), authorized by ``wallet`` at nonce 0."""
        return signer_add_message(
            self.wallet.address, self.wallet, 0, self.key, network=pb.NETWORK_DEVNET, now=int(time.time())
        )
