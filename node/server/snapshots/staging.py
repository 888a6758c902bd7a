"""Restores assembled aside and renamed into place: `--restore`, state sync and operator-driven restores.

A restore writes the store into `DATA_DIR/.restore/data.mdb` (with the manifest it follows in
`.restore/manifest.pb`), checks every chunk against the manifest, fsyncs, verifies the result
(node/server/snapshots/verify.py), and only then renames it to `DATA_DIR/data.mdb` and fsyncs the
directory. A crash at any point leaves either no `data.mdb` (or the previous one) plus a `.restore`
directory, never a partial store: the next state sync resumes the `.restore` directory when it follows the
same manifest (chunks already there are hashed again, not trusted), and any other start removes it.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from collections.abc import Iterable
from pathlib import Path

from chain.v1 import block_pb2
from chain.v1 import snapshot_sync_pb2 as pb
from node.errors import RestoreFailed
from node.server.snapshots.files import STORE_FILE
from node.server.snapshots.manifest import (
    MANIFEST_FILE,
    check_shape,
    chunk_hash,
    chunk_size_of,
    load_manifest,
    read_chunks,
    save_manifest,
)
from node.server.snapshots.verify import Expected, verify_store
from node.storage.identity import LOCK_FILE, fsync_dir

STAGING_DIR = ".restore"
log = logging.getLogger("chain.restore")


class RestoreTimeout(RestoreFailed):
    """A restore ran past its own budget (`--restore-timeout`); what it fetched stays for the next try."""


class Staging:
    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.dir = data_dir / STAGING_DIR

    @property
    def store(self) -> Path:
        return self.dir / STORE_FILE

    def exists(self) -> bool:
        return self.dir.exists()

    def discard(self) -> None:
        if self.dir.exists():
            log.warning("removing the leftover of an interrupted restore in %s", self.dir)
            shutil.rmtree(self.dir)

    def begin(self, manifest: pb.SnapshotManifest) -> int:
        """Prepare to receive `manifest`'s chunks; the index of the first chunk still needed (resume)."""
        check_shape(manifest)
        if self.dir.exists() and load_manifest(self.dir) == manifest and self.store.exists():
            have = self._verified_prefix(manifest)
            log.info(
                "resuming the restore of %s: %d of %d chunks already here", manifest.name, have, manifest.chunk_count
            )
            return have
        self.discard()
        self.dir.mkdir(parents=True)
        save_manifest(self.dir, manifest)
        self.store.touch()
        return 0

    def _verified_prefix(self, manifest: pb.SnapshotManifest) -> int:
        """Chunks at the start of the staged file that match the manifest; the file is cut after them."""
        have = 0
        for index, data in read_chunks(self.store, int(manifest.chunk_size)):
            if index >= manifest.chunk_count or len(data) != chunk_size_of(manifest, index):
                break
            if chunk_hash(data) != manifest.chunk_hashes[index]:
                break
            have = index + 1
        os.truncate(self.store, have * int(manifest.chunk_size) if have < manifest.chunk_count else manifest.total_size)
        return have

    def write(
        self, manifest: pb.SnapshotManifest, chunks: Iterable[tuple[int, bytes]], first: int, deadline: float
    ) -> int:
        """Append verified chunks from `first` on; returns how many chunks the staged file holds after."""
        writer = ChunkWriter(self, manifest, first)
        try:
            for index, data in chunks:
                writer.add(index, data)
                if time.monotonic() > deadline:
                    raise RestoreTimeout(f"restore of {manifest.name} ran out of time at chunk {writer.next}")
        finally:
            writer.close()
        return writer.next

    def install(self, manifest: pb.SnapshotManifest, expected: Expected, *, replace: bool) -> block_pb2.Block:
        """Verify the complete staged store and rename it into place (replacing an old store only if asked)."""
        if self.store.stat().st_size != manifest.total_size:
            raise RestoreFailed(f"staged store holds {self.store.stat().st_size} bytes, expected {manifest.total_size}")
        target = self.data_dir / STORE_FILE
        if target.exists() and not replace:
            raise RestoreFailed(f"{self.data_dir} already holds a store; restore into an empty data dir")
        head = verify_store(self.dir, expected)
        for name in (LOCK_FILE, MANIFEST_FILE):
            (self.dir / name).unlink(missing_ok=True)
        (self.data_dir / LOCK_FILE).unlink(missing_ok=True)  # a stale lock of the store being replaced
        self.store.replace(target)
        fsync_dir(self.data_dir)
        shutil.rmtree(self.dir)
        fsync_dir(self.data_dir)
        return head


class ChunkWriter:
    """Appends chunks to the staged store, each checked before a byte of it is written."""

    def __init__(self, staging: Staging, manifest: pb.SnapshotManifest, first: int) -> None:
        self.manifest = manifest
        self.next = first
        self._f = staging.store.open("r+b")
        self._f.seek(first * int(manifest.chunk_size))

    def add(self, index: int, data: bytes) -> None:
        check_chunk(self.manifest, index, data, self.next)
        self._f.write(data)
        self.next += 1

    @property
    def complete(self) -> bool:
        return self.next == self.manifest.chunk_count

    def close(self) -> None:
        """Flush and fsync what was written (a later resume hashes it again anyway)."""
        if not self._f.closed:
            self._f.flush()
            os.fsync(self._f.fileno())
            self._f.close()


def check_chunk(manifest: pb.SnapshotManifest, index: int, data: bytes, expect: int) -> None:
    """A chunk out of order, of the wrong size or with the wrong BLAKE3 hash is refused."""
    if index != expect:
        raise RestoreFailed(f"snapshot {manifest.name}: got chunk {index}, expected {expect}")
    if len(data) != chunk_size_of(manifest, index):
        raise RestoreFailed(f"snapshot {manifest.name}: chunk {index} holds {len(data)} bytes")
    if chunk_hash(data) != manifest.chunk_hashes[index]:
        raise RestoreFailed(f"snapshot {manifest.name}: chunk {index} hash mismatch (damaged in store or transit)")
