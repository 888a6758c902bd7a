"""`chain-node backup restore`: disaster recovery from the object store into an empty data dir.

The backup (the newest complete one of the network, or the one named) is checked before a byte is fetched:
it must be complete (`manifest.pb` present), its manifest must hash to the BLAKE3 that `backup.json`
recorded and name the block and state root its key says. Then the store is downloaded through the same
staging directory as `--restore` and state sync (node/server/snapshots/staging.py): every chunk hashed and
checked before it is written, the complete store verified read-only (head block, header hash, state root,
every tree node) and only then renamed to DATA_DIR/data.mdb. A chunk that does not match ends the restore
with CHECKSUM_MISMATCH and the staged copy removed: no half store is ever left. A download cut by the
network is resumed by the next run from the last good chunk.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from blake3 import blake3
from google.protobuf.message import DecodeError

from chain.v1 import snapshot_sync_pb2 as sync_pb
from node.errors import BackupFailed, BackupReason, RestoreFailed
from node.server.backup.layout import DATA, INFO, MANIFEST, Listed, Location, group
from node.server.backup.objstore import Bucket
from node.server.devnet import AUTHORITY_FILE
from node.server.snapshots.manifest import check_shape
from node.server.snapshots.staging import RestoreTimeout, Staging
from node.server.snapshots.verify import Expected
from node.storage.identity import DATA_FILE, IDENTITY_FILE, LOCK_FILE, move_aside

log = logging.getLogger("chain.backup")
STORE_FILES = (DATA_FILE, LOCK_FILE, IDENTITY_FILE, AUTHORITY_FILE)  # what --reinitialize moves aside


@dataclass(frozen=True)
class Restored:
    url: str
    name: str
    height: int
    state_root: str
    block_hash: str
    moved_aside: str  # where --reinitialize put the previous store ("" when there was none)


def choose(bucket: Bucket, root: Location, network: str) -> Listed:
    """The backup named by `root`, or the newest complete one of `network`."""
    if root.name:
        prefix = root.key(root.network, root.name)
        found = group(bucket.objects(prefix), root.network_prefix(root.network))
        if not found:
            raise BackupFailed(BackupReason.BACKUP_NOT_FOUND, f"no backup at {root.url()}")
        if not found[0].complete:
            raise BackupFailed(
                BackupReason.INCOMPLETE_BACKUP, f"{root.url()} is incomplete (an interrupted upload); pick another"
            )
        return found[0]
    complete = [
        b for b in group(bucket.objects(root.network_prefix(network)), root.network_prefix(network)) if b.complete
    ]
    if not complete:
        raise BackupFailed(BackupReason.BACKUP_NOT_FOUND, f"no complete {network} backup under {root.url()}")
    return complete[-1]


def load_manifest(bucket: Bucket, root: Location, network: str, chosen: Listed) -> sync_pb.SnapshotManifest:
    """The backup's manifest, checked against backup.json and against the backup's own name."""
    raw, info = bucket.get(root.key(network, chosen.name, MANIFEST)), bucket.get(root.key(network, chosen.name, INFO))
    if raw is None or info is None:
        raise BackupFailed(BackupReason.INCOMPLETE_BACKUP, f"{chosen.name}: {MANIFEST} or {INFO} is missing")
    try:
        doc: dict[str, Any] = json.loads(info)
        recorded = str(doc["manifest_blake3"])
    except (ValueError, KeyError, TypeError):
        raise BackupFailed(BackupReason.CHECKSUM_MISMATCH, f"{chosen.name}: {INFO} is damaged") from None
    if blake3(raw).hexdigest() != recorded:
        raise BackupFailed(BackupReason.CHECKSUM_MISMATCH, f"{chosen.name}: {MANIFEST} does not match {INFO}")
    try:
        manifest = sync_pb.SnapshotManifest.FromString(raw)
        check_shape(manifest)
    except (DecodeError, RestoreFailed) as exc:
        raise BackupFailed(BackupReason.CHECKSUM_MISMATCH, f"{chosen.name}: {MANIFEST}: {exc}") from None
    if int(manifest.block_number) != chosen.height or bytes(manifest.state_root).hex() != chosen.state_root:
        raise BackupFailed(BackupReason.CHECKSUM_MISMATCH, f"{chosen.name}: the manifest is of another block")
    return manifest


def read_chunks(body: Any, manifest: sync_pb.SnapshotManifest, first: int) -> Iterator[tuple[int, bytes]]:
    """(index, bytes) of each chunk from `first` on, read from the object's stream."""
    size = int(manifest.chunk_size)
    try:
        for index in range(first, int(manifest.chunk_count)):
            want = size if index < manifest.chunk_count - 1 else int(manifest.total_size) - size * index
            buf = bytearray()
            while len(buf) < want:
                data = body.read(want - len(buf))
                if not data:
                    break
                buf += data
            yield index, bytes(buf)
            if len(buf) < want:
                return  # the object is shorter than the manifest: the chunk check above refused it already
    finally:
        body.close()


def restore(
    bucket: Bucket, root: Location, network: str, data_dir: Path, *, reinitialize: bool = False,
    expect_root: bytes | None = None, timeout: float = 3600.0,
) -> Restored:  # fmt: skip
    """Put the chosen backup in place as `data_dir`'s store (see the module doc)."""
    deadline = time.monotonic() + timeout
    network = root.network or network
    if (data_dir / DATA_FILE).exists() and not reinitialize:
        raise BackupFailed(
            BackupReason.STORE_NOT_EMPTY,
            f"{data_dir} already holds a store; restore into an empty data dir, or pass --reinitialize to move "
            "it aside",
        )
    bucket.check()
    chosen = choose(bucket, root, network)
    manifest = load_manifest(bucket, root, network, chosen)
    if expect_root is not None and bytes(manifest.state_root) != expect_root:
        raise BackupFailed(BackupReason.RESTORE_REFUSED, f"{chosen.name} does not have the expected state root")
    where = Location(root.bucket, root.prefix, network, chosen.name)
    data_dir.mkdir(parents=True, exist_ok=True)
    staging = Staging(data_dir)
    first = staging.begin(manifest)
    log.info("restoring %s (block %d, %d bytes) from chunk %d", where.url(), chosen.height, manifest.total_size, first)
    if first < manifest.chunk_count:
        body = bucket.stream(root.key(network, chosen.name, DATA), first * int(manifest.chunk_size))
        _download(staging, manifest, read_chunks(body, manifest, first), first, deadline)
    aside = ""
    if (data_dir / DATA_FILE).exists():  # --reinitialize: the old store is kept, moved aside, never deleted
        aside = str(move_aside(data_dir, STORE_FILES))
        log.warning("--reinitialize: the previous store was moved to %s", aside)
    expected = Expected(int(manifest.block_number), bytes(manifest.block_hash), bytes(manifest.state_root))
    try:
        head = staging.install(manifest, expected, replace=False)
    except RestoreFailed as exc:
        staging.discard()
        raise BackupFailed(BackupReason.RESTORE_REFUSED, f"{where.url()}: {exc}; nothing was installed") from None
    return Restored(where.url(), chosen.name, chosen.height, chosen.state_root, bytes(head.hash).hex(), aside)


def _download(
    staging: Staging, manifest: sync_pb.SnapshotManifest, chunks: Iterator[tuple[int, bytes]], first: int,
    deadline: float,
) -> None:  # fmt: skip
    try:
        staging.write(manifest, chunks, first, deadline)
    except RestoreTimeout as exc:  # what was fetched stays: the next run resumes after it
        raise BackupFailed(BackupReason.RESTORE_REFUSED, f"{exc}; run again to resume") from None
    except RestoreFailed as exc:  # a chunk that does not match: this backup is damaged, start over elsewhere
        staging.discard()
        raise BackupFailed(BackupReason.CHECKSUM_MISMATCH, f"{exc}; nothing was installed") from None
