"""Devnet genesis: a fresh node with no genesis file makes its own storage authority.

The authority's keys are written to DATA_DIR/devnet-authority.json (and
printed) so `chainctl account fund` can grant storage at once. The first block
registers the authority's Ed25519 key (a SIGNER_ADD authorized by its wallet,
`bootstrap_message`). The file format is node.authority's, which clients read too.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from chain.v1 import message_pb2 as pb
from node.authority import Authority
from node.params import ChainParams

AUTHORITY_FILE = "devnet-authority.json"


def new_devnet(data_dir: Path) -> tuple[ChainParams, Authority]:
    authority = Authority.generate()
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


def bootstrap_message(data_dir: Path) -> pb.Message:
    """The devnet's first message: the authority (read back from its file) registers its Ed25519 key."""
    return Authority.load(data_dir / AUTHORITY_FILE).bootstrap_message()
