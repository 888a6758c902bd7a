"""Devnet genesis: a fresh node with no genesis file makes its own storage authority.

The authority's keys are written to DATA_DIR/devnet-authority.json (and
printed) so `chainctl account fund` can grant storage at once. The first block
registers the authority's Ed25519 key (a SIGNER_ADD authorized by its wallet).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from chain.v1 import message_pb2 as pb
from node.sdk.authority import Authority
from node.sdk.keys import Ed25519Key, Secp256k1Key
from node.state.params import ChainParams

AUTHORITY_FILE = "devnet-authority.json"


def new_devnet(data_dir: Path) -> tuple[ChainParams, Authority]:
    authority = Authority(Secp256k1Key.generate(), Ed25519Key.generate())
    data_dir.mkdir(parents=True, exist_ok=True)
    path = data_dir / AUTHORITY_FILE
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(authority.to_json(), f, indent=2)
    params = ChainParams(
        network=pb.NETWORK_DEVNET,
        storage_authorities=frozenset({authority.wallet.address}),
        genesis_time_ms=int(time.time() * 1000),
    )
    return params, authority
