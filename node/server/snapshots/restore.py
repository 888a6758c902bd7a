"""`--restore DIR`: put a local snapshot in place as the node's store, through the staging directory.

The snapshot's chunks are copied into `DATA_DIR/.restore`, each checked against the snapshot's manifest,
then the copy is verified and renamed into place (node/server/snapshots/staging.py): an interrupted
restore leaves no partial `data.mdb`, and a damaged snapshot is refused before it becomes the store.
"""

from __future__ import annotations

import time
from pathlib import Path

from chain.v1 import node_info_pb2
from node.errors import ConfigError
from node.server.snapshots.files import STORE_FILE
from node.server.snapshots.manager import INFO, expected_of, manifest_of, read_info
from node.server.snapshots.manifest import read_chunks
from node.server.snapshots.staging import Staging

DEFAULT_RESTORE_TIMEOUT = 3600.0


def restore(snapshot: Path, data_dir: Path, *, timeout: float = DEFAULT_RESTORE_TIMEOUT) -> node_info_pb2.SnapshotInfo:
    """Put a snapshot in place as the node's store (the data dir must hold no store yet)."""
    if not (snapshot / STORE_FILE).exists() or not (snapshot / INFO).exists():
        raise ConfigError(f"{snapshot} is not a snapshot (no {STORE_FILE} / {INFO})")
    if (data_dir / STORE_FILE).exists():
        raise ConfigError(f"{data_dir} already holds a store; restore into an empty data dir")
    deadline = time.monotonic() + timeout
    data_dir.mkdir(parents=True, exist_ok=True)
    manifest = manifest_of(snapshot)
    staging = Staging(data_dir)
    staging.discard()  # a local copy is cheap to start over; state sync resumes instead
    first = staging.begin(manifest)
    staging.write(manifest, read_chunks(snapshot / STORE_FILE, int(manifest.chunk_size), first), first, deadline)
    staging.install(manifest, expected_of(snapshot), replace=False)
    return read_info(snapshot)
