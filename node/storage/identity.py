"""What a store is: its format version, network and genesis hash, kept twice.

- In the store, under `meta_key(META_IDENTITY)`, written in the genesis transaction: it travels with the
  store (snapshots, state sync) and cannot disagree with the blocks beside it.
- Beside the store, in `DATA_DIR/store-identity.json`, written atomically (temporary file, fsync, rename,
  fsync of the directory) right after the genesis transaction: readable without mapping `data.mdb`, and
  the marker that this directory has held a store. A directory with this file (or `data.mdb`, `lock.mdb`
  or a devnet authority file) is never initialised again.

A store made before identities existed has neither; the first sound open adopts it (writes both from its
genesis block). See docs/operations.md, "Store identity and integrity".
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chain.v1 import message_pb2 as pb

# what this node writes: 2 stores tree nodes with their block (node/storage/tree_layout.py), 3 each committed
# message once, under its event id (node/storage/chainlog.py)
FORMAT_VERSION = 3
READABLE_FORMATS = (1, 2, 3)  # what it opens; an older store is marked 3 when opened for writing
IDENTITY_FILE = "store-identity.json"
DATA_FILE = "data.mdb"
LOCK_FILE = "lock.mdb"


class IdentityUnreadable(ValueError):
    """The identity record or file does not parse."""


def network_name(network: int) -> str:
    """NETWORK_DEVNET -> devnet (the --network spelling)."""
    return pb.Network.Name(network).removeprefix("NETWORK_").lower()  # type: ignore[arg-type]


@dataclass(frozen=True)
class StoreIdentity:
    format_version: int
    network: str
    genesis_hash: bytes

    def to_json(self) -> dict[str, Any]:
        return {"format_version": self.format_version, "network": self.network, "genesis_hash": self.genesis_hash.hex()}

    def encode(self) -> bytes:
        return json.dumps(self.to_json(), sort_keys=True).encode()

    @classmethod
    def decode(cls, raw: bytes) -> StoreIdentity:
        try:
            doc = json.loads(raw)
            return cls(int(doc["format_version"]), str(doc["network"]), bytes.fromhex(doc["genesis_hash"]))
        except (ValueError, KeyError, TypeError) as err:
            raise IdentityUnreadable(str(err)) from None

    def same_chain(self, other: StoreIdentity) -> bool:
        """The same network and genesis, whatever the format versions."""
        return (self.network, self.genesis_hash) == (other.network, other.genesis_hash)

    def describe(self) -> str:
        return f"{self.network} chain with genesis {self.genesis_hash.hex()[:16]}"


def read_identity_file(data_dir: Path) -> StoreIdentity | None:
    path = data_dir / IDENTITY_FILE
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    return StoreIdentity.decode(raw)


def write_identity_file(data_dir: Path, identity: StoreIdentity) -> None:
    """Atomically: a crash leaves either no file or the whole file."""
    tmp = data_dir / f".{IDENTITY_FILE}.tmp"
    with open(tmp, "wb") as f:
        f.write(json.dumps(identity.to_json(), indent=2, sort_keys=True).encode() + b"\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, data_dir / IDENTITY_FILE)
    fsync_dir(data_dir)


def fsync_dir(path: Path) -> None:
    """Make a rename or a new entry in `path` durable (also used by snapshots, restores and backups)."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def move_aside(data_dir: Path, names: tuple[str, ...]) -> Path:
    """Move these files of a refused store into DATA_DIR/replaced-<UTC time>/ (never deleted); returns it."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    aside = data_dir / f"replaced-{stamp}"
    suffix = 1
    while aside.exists():
        suffix += 1
        aside = data_dir / f"replaced-{stamp}-{suffix}"
    aside.mkdir()
    for name in names:
        if (data_dir / name).exists():
            os.rename(data_dir / name, aside / name)
    fsync_dir(data_dir)
    return aside
