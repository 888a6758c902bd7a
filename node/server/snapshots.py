"""Snapshots: consistent copies of the store at a committed block, and restoring from one.

A snapshot is a directory holding a compacted LMDB copy (`data.mdb`, taken
inside one read transaction, so it is exactly one committed block) and
`snapshot.json` describing it (block number, entry count, state root).
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

from chain.v1 import node_info_pb2
from node.chain import Chain
from node.errors import ConfigError, InvariantBroken
from node.storage.lmdb_store import LmdbStore

INFO = "snapshot.json"


def read_info(directory: Path) -> node_info_pb2.SnapshotInfo:
    doc = json.loads((directory / INFO).read_text())
    return node_info_pb2.SnapshotInfo(
        block_number=doc["block_number"],
        entry_count=doc["entry_count"],
        state_root=bytes.fromhex(doc["state_root"]),
        created_at=doc["created_at"],
        name=directory.name,
    )


class SnapshotManager:
    def __init__(self, chain: Chain, directory: Path) -> None:
        self.chain = chain
        self.directory = directory

    def create(self) -> node_info_pb2.SnapshotInfo:
        self.directory.mkdir(parents=True, exist_ok=True)
        tmp = self.directory / f".tmp-{time.time_ns()}"
        self.chain.store.copy_to(tmp)
        copy = LmdbStore(tmp, sync=True)
        try:
            head = Chain(copy, self.chain.params).head()
            entries = copy.entry_count()
        finally:
            copy.close()
        number = int(head.header.number)
        created = int(time.time())
        name = f"snap-{number:012d}-{created}"
        doc = {
            "block_number": number,
            "entry_count": entries,
            "state_root": head.header.state_root.hex(),
            "created_at": created,
        }
        (tmp / INFO).write_text(json.dumps(doc, indent=2) + "\n")
        (tmp / "lock.mdb").unlink(missing_ok=True)
        return read_info(self._publish(tmp, name))

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


def restore(snapshot: Path, data_dir: Path) -> node_info_pb2.SnapshotInfo:
    """Put a snapshot in place as the node's store (the data dir must hold no store yet)."""
    if not (snapshot / "data.mdb").exists() or not (snapshot / INFO).exists():
        raise ConfigError(f"{snapshot} is not a snapshot (no data.mdb / {INFO})")
    if (data_dir / "data.mdb").exists():
        raise ConfigError(f"{data_dir} already holds a store; restore into an empty data dir")
    data_dir.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(snapshot / "data.mdb", data_dir / "data.mdb")
    return read_info(snapshot)
