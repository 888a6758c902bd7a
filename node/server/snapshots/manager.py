"""Snapshots: consistent copies of the store at a committed block, and restoring from one.

A snapshot is a directory holding a compacted LMDB copy (`data.mdb`, taken inside one read transaction, so
it is exactly one committed block), `snapshot.json` describing it (block number, header hash, entry count,
state root) and `manifest.pb`, the chunk hashes other members check a state sync against.
"""

from __future__ import annotations

import contextlib
import json
import logging
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from chain.v1 import node_info_pb2
from chain.v1 import snapshot_sync_pb2 as sync_pb
from node.chain import Chain
from node.errors import InvariantBroken, NotFound
from node.server.snapshots.files import STORE_FILE, fsync_file
from node.server.snapshots.manifest import DEFAULT_CHUNK_BYTES, build_manifest, load_manifest, save_manifest
from node.server.snapshots.verify import Expected, verify_store
from node.storage.identity import LOCK_FILE, fsync_dir
from node.storage.lmdb_store import LmdbStore

INFO = "snapshot.json"
# A snapshot being copied (`.tmp-<ns>`) and one being deleted (`.deleting-<name>`): never a snapshot, and
# removed when the node starts (a crash or kill -9 in the middle leaves one behind).
LEFTOVER_PREFIXES = (".tmp-", ".deleting-")
log = logging.getLogger("chain.snapshots")


def read_info(directory: Path) -> node_info_pb2.SnapshotInfo:
    doc = json.loads((directory / INFO).read_text())
    return node_info_pb2.SnapshotInfo(
        block_number=doc["block_number"],
        entry_count=doc["entry_count"],
        state_root=bytes.fromhex(doc["state_root"]),
        created_at=doc["created_at"],
        name=directory.name,
    )


def expected_of(directory: Path) -> Expected:
    """What a store restored from this snapshot must hold (its header hash when the snapshot recorded it)."""
    doc = json.loads((directory / INFO).read_text())
    block_hash = bytes.fromhex(doc["block_hash"]) if "block_hash" in doc else None
    return Expected(int(doc["block_number"]), block_hash, bytes.fromhex(doc["state_root"]))


class SnapshotManager:
    """Takes, lists and describes the snapshots in `directory`, which belongs to this one node.

    `hold_file` is a test hook: while that file exists, a snapshot being taken waits after copying the store
    and before it is published (tests use it to stand for a copy that takes long, then kill the node or let
    the copy finish); None in production.
    """

    def __init__(
        self,
        chain: Chain | None,
        directory: Path,
        *,
        chunk_bytes: int = DEFAULT_CHUNK_BYTES,
        hold_file: Path | None = None,
    ) -> None:
        self.chain = chain
        self.directory = directory
        self.chunk_bytes = chunk_bytes
        self.hold_file = hold_file
        self._listeners: list[Callable[[], None]] = []

    def listen(self, listener: Callable[[], None]) -> None:
        """Call `listener` (in the thread that made the change) once a snapshot was published or deleted."""
        self._listeners.append(listener)

    def changed(self) -> None:
        """Tell the listeners the set of snapshots changed (after the change is on disk)."""
        for listener in self._listeners:
            listener()

    def discard_leftovers(self) -> list[str]:
        """Remove the copies and deletions a crash interrupted (at start-up, before any job runs)."""
        if not self.directory.is_dir():
            return []
        removed = []
        for entry in sorted(self.directory.iterdir()):
            if entry.name.startswith(LEFTOVER_PREFIXES) and entry.is_dir():
                log.warning("removing %s, left by an interrupted snapshot or deletion", entry)
                shutil.rmtree(entry)
                removed.append(entry.name)
        if removed:
            fsync_dir(self.directory)
        return removed

    def create(self) -> node_info_pb2.SnapshotInfo:
        if self.chain is None:
            raise InvariantBroken("this snapshot manager has no chain to copy")
        self.directory.mkdir(parents=True, exist_ok=True)
        tmp = self.directory / f".tmp-{time.time_ns()}"
        try:
            info = self._take(self.chain, tmp)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)  # a failed copy leaves nothing behind
            raise
        self.changed()
        return info

    def _hold(self) -> None:
        while self.hold_file is not None and self.hold_file.exists():
            time.sleep(0.05)

    def _take(self, chain: Chain, tmp: Path) -> node_info_pb2.SnapshotInfo:
        chain.store.copy_to(tmp)
        self._hold()
        copy = LmdbStore(tmp, sync=True)
        try:
            head = Chain(copy, chain.params).head()
            entries = copy.entry_count()
        finally:
            copy.close()
        number = int(head.header.number)
        created = int(time.time())
        name = f"snap-{number:012d}-{created}"
        doc = {
            "block_number": number,
            "block_hash": bytes(head.hash).hex(),
            "entry_count": entries,
            "state_root": head.header.state_root.hex(),
            "created_at": created,
        }
        (tmp / INFO).write_text(json.dumps(doc, indent=2) + "\n")
        (tmp / LOCK_FILE).unlink(missing_ok=True)
        fsync_file(tmp / STORE_FILE)
        fsync_file(tmp / INFO)
        fsync_dir(tmp)
        final = self._publish(tmp, name)
        manifest_of(final, self.chunk_bytes)  # now, so a member state-syncing from it never waits for the hashing
        return read_info(final)

    def _publish(self, tmp: Path, name: str) -> Path:
        """Move the finished copy to its name; a second snapshot of the same block in the same second
        gets the next free suffix (`-2`, `-3`, ...) instead of failing."""
        for attempt in range(1, 1000):
            final = self.directory / (name if attempt == 1 else f"{name}-{attempt}")
            if final.exists():
                continue
            try:
                tmp.rename(final)
            except OSError:
                if final.exists():
                    continue  # taken meanwhile by a concurrent snapshot
                raise
            fsync_dir(self.directory)
            return final
        raise InvariantBroken(f"no free snapshot name for {name} in {self.directory}")

    def list(self) -> list[node_info_pb2.SnapshotInfo]:
        if not self.directory.exists():
            return []
        infos = [read_info(d) for d in self.directory.iterdir() if (d / INFO).exists() and d.name.startswith("snap-")]
        return sorted(infos, key=lambda i: (i.block_number, i.created_at), reverse=True)

    def latest(self) -> node_info_pb2.SnapshotInfo | None:
        snapshots = self.list()
        return snapshots[0] if snapshots else None

    def manifest(self, name: str = "") -> tuple[sync_pb.SnapshotManifest, Path]:
        """The manifest of snapshot `name` ("" for the newest) and its directory; computed once, then kept."""
        if not name:
            latest = self.latest()
            if latest is None:
                raise NotFound("snapshot", "(newest)")
            name = latest.name
        directory = self.directory / name
        if not name.startswith("snap-") or "/" in name or not (directory / INFO).is_file():
            raise NotFound("snapshot", name)
        return manifest_of(directory, self.chunk_bytes), directory


def manifest_of(directory: Path, chunk_bytes: int = DEFAULT_CHUNK_BYTES) -> sync_pb.SnapshotManifest:
    """The snapshot's kept manifest, or one computed now (and kept when the directory is writable)."""
    cached = load_manifest(directory)
    if cached is not None:
        return cached
    expected = expected_of(directory)
    block_hash = expected.block_hash
    if block_hash is None:  # a snapshot from before header hashes were recorded: read its head
        block_hash = bytes(verify_store(directory, expected).hash)
    info = read_info(directory)
    manifest = build_manifest(
        directory, name=directory.name, block_number=int(info.block_number), block_hash=block_hash,
        state_root=bytes(info.state_root), entry_count=int(info.entry_count), chunk_size=chunk_bytes,
    )  # fmt: skip
    with contextlib.suppress(OSError):  # a read-only snapshot volume: compute it again next time
        save_manifest(directory, manifest)
    return manifest
