"""A snapshot's manifest: its block, state root, and the BLAKE3 hash of every chunk of its `data.mdb`.

The manifest is what a serving member announces and what a joining member checks every byte against
(docs/replication.md, "State sync"). It is computed once per snapshot and kept beside it as
`manifest.pb` (written to a temporary name, fsynced, renamed).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from blake3 import blake3

from chain.v1 import snapshot_sync_pb2 as pb
from node.errors import RestoreFailed
from node.server.snapshots.files import STORE_FILE, write_atomic

MANIFEST_FILE = "manifest.pb"
DEFAULT_CHUNK_BYTES = 1024 * 1024


def chunk_hash(data: bytes) -> bytes:
    return blake3(data).digest()


def chunk_size_of(manifest: pb.SnapshotManifest, index: int) -> int:
    """How many bytes chunk `index` holds (all but the last hold exactly chunk_size)."""
    if index < 0 or index >= manifest.chunk_count:
        raise RestoreFailed(f"chunk {index} is outside 0..{manifest.chunk_count - 1}")
    if index < manifest.chunk_count - 1:
        return int(manifest.chunk_size)
    return int(manifest.total_size - manifest.chunk_size * (manifest.chunk_count - 1))


def read_chunks(path: Path, chunk_size: int, first: int = 0) -> Iterator[tuple[int, bytes]]:
    """(index, bytes) of each chunk of a file from chunk `first` on."""
    with path.open("rb") as f:
        f.seek(first * chunk_size)
        index = first
        while data := f.read(chunk_size):
            yield index, data
            index += 1


def build_manifest(
    directory: Path, *, name: str, block_number: int, block_hash: bytes, state_root: bytes, entry_count: int,
    chunk_size: int = DEFAULT_CHUNK_BYTES,
) -> pb.SnapshotManifest:  # fmt: skip
    store = directory / STORE_FILE
    hashes = [chunk_hash(data) for _, data in read_chunks(store, chunk_size)]
    return pb.SnapshotManifest(
        name=name,
        block_number=block_number,
        block_hash=block_hash,
        state_root=state_root,
        entry_count=entry_count,
        total_size=store.stat().st_size,
        chunk_size=chunk_size,
        chunk_count=len(hashes),
        chunk_hashes=hashes,
    )


def check_shape(manifest: pb.SnapshotManifest) -> None:
    """A manifest whose numbers do not add up is refused before any chunk is fetched."""
    size, count, chunk = int(manifest.total_size), int(manifest.chunk_count), int(manifest.chunk_size)
    if chunk <= 0 or count <= 0 or len(manifest.chunk_hashes) != count:
        raise RestoreFailed(f"snapshot manifest {manifest.name!r}: {count} chunks, {len(manifest.chunk_hashes)} hashes")
    if not chunk * (count - 1) < size <= chunk * count:
        raise RestoreFailed(f"snapshot manifest {manifest.name!r}: {size} bytes do not fit {count} chunks of {chunk}")
    if any(len(h) != 32 for h in manifest.chunk_hashes) or len(manifest.block_hash) != 32:
        raise RestoreFailed(f"snapshot manifest {manifest.name!r}: hashes must be 32 bytes")


def save_manifest(directory: Path, manifest: pb.SnapshotManifest) -> None:
    write_atomic(directory / MANIFEST_FILE, manifest.SerializeToString())


def load_manifest(directory: Path) -> pb.SnapshotManifest | None:
    path = directory / MANIFEST_FILE
    if not path.exists():
        return None
    return pb.SnapshotManifest.FromString(path.read_bytes())
