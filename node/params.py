"""Chain parameters fixed at genesis."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chain.v1 import message_pb2 as pb


@dataclass(frozen=True)
class ChainParams:
    """What every node of a network must agree on (from the genesis file)."""

    network: pb.Network.ValueType = pb.NETWORK_DEVNET
    # Accounts whose STORAGE_GRANT messages fund storage.
    storage_authorities: frozenset[bytes] = field(default_factory=frozenset)
    # WebAuthn relying party and allowed origins (empty: https://<rp_id> and subdomains).
    webauthn_rp_id: str = "localhost"
    webauthn_origins: frozenset[str] = field(default_factory=frozenset)
    genesis_time_ms: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "network": pb.Network.Name(self.network),
            "storage_authorities": sorted("0x" + a.hex() for a in self.storage_authorities),
            "webauthn_rp_id": self.webauthn_rp_id,
            "webauthn_origins": sorted(self.webauthn_origins),
            "genesis_time_ms": self.genesis_time_ms,
        }

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> ChainParams:
        return cls(
            network=pb.Network.Value(doc["network"]),
            storage_authorities=frozenset(bytes.fromhex(a.removeprefix("0x")) for a in doc["storage_authorities"]),
            webauthn_rp_id=doc.get("webauthn_rp_id", "localhost"),
            webauthn_origins=frozenset(doc.get("webauthn_origins", [])),
            genesis_time_ms=int(doc.get("genesis_time_ms", 0)),
        )

    @classmethod
    def load(cls, path: Path) -> ChainParams:
        return cls.from_json(json.loads(path.read_text()))

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(self.to_json(), indent=2) + "\n")
