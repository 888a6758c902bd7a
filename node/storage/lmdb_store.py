"""The embedded store: LMDB on disk.

Two named databases: `state` (every key built by node.storage.schema) and
`tree` (sparse Merkle tree nodes, content addressed). A block's writes,
including its tree nodes, go in one write transaction, so a crash leaves the
store exactly at the previous block.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import lmdb

from node.errors import StorageFailed
from node.storage.kv import prefix_end

DEFAULT_MAP_SIZE = 64 * 1024**3


class LmdbReadView:
    """A ReadView over one LMDB read transaction."""

    def __init__(self, txn: Any, db: Any) -> None:
        self._txn = txn
        self._db = db

    def get(self, key: bytes) -> bytes | None:
        value = self._txn.get(key, db=self._db)
        return None if value is None else bytes(value)

    def scan(self, prefix: bytes, start: bytes | None = None, reverse: bool = False) -> Iterator[tuple[bytes, bytes]]:
        cursor = self._txn.cursor(db=self._db)
        if reverse:
            yield from self._scan_reverse(cursor, prefix, start)
            return
        if not cursor.set_range(start if start is not None and start > prefix else prefix):
            return
        for raw_key, value in cursor:
            key = bytes(raw_key)
            if not key.startswith(prefix):
                return
            yield key, bytes(value)

    @staticmethod
    def _scan_reverse(cursor: Any, prefix: bytes, start: bytes | None) -> Iterator[tuple[bytes, bytes]]:
        if start is not None:
            if cursor.set_range(start):
                if bytes(cursor.key()) != start and not cursor.prev():
                    return
            elif not cursor.last():
                return
        else:
            end = prefix_end(prefix)
            if end is None or not cursor.set_range(end):
                if not cursor.last():
                    return
            elif not cursor.prev():
                return
        while True:
            key = bytes(cursor.key())
            if not key.startswith(prefix):
                if key < prefix:
                    return
            else:
                yield key, bytes(cursor.value())
            if not cursor.prev():
                return


class LmdbNodeView:
    """Tree-node lookups by hash within one LMDB transaction."""

    def __init__(self, txn: Any, db: Any) -> None:
        self._txn = txn
        self._db = db

    def get(self, node_hash: bytes) -> bytes | None:
        value = self._txn.get(node_hash, db=self._db)
        return None if value is None else bytes(value)


class ReadSnapshot:
    """An open read transaction and its views."""

    def __init__(self, txn: Any, view: LmdbReadView, nodes: LmdbNodeView) -> None:
        self._txn = txn
        self.view = view
        self.nodes = nodes

    def close(self) -> None:
        self._txn.abort()


class LmdbStore:
    """Owns the LMDB environment."""

    def __init__(self, path: Path | str, *, map_size: int = DEFAULT_MAP_SIZE, sync: bool = True) -> None:
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)
        self._env = lmdb.open(
            str(self.path),
            map_size=map_size,
            max_dbs=4,
            sync=sync,
            metasync=sync,
            readahead=False,
            max_readers=512,
        )
        self._state = self._env.open_db(b"state")
        self._tree = self._env.open_db(b"tree")

    @contextmanager
    def read(self) -> Iterator[tuple[LmdbReadView, LmdbNodeView]]:
        """A consistent snapshot: state view and tree-node view of one transaction."""
        with self._env.begin(buffers=True) as txn:
            yield LmdbReadView(txn, self._state), LmdbNodeView(txn, self._tree)

    def begin_read(self) -> ReadSnapshot:
        """A long-lived read snapshot (close it when done): the mempool validates against one."""
        txn = self._env.begin(buffers=True)
        return ReadSnapshot(txn, LmdbReadView(txn, self._state), LmdbNodeView(txn, self._tree))

    def commit(self, writes: Mapping[bytes, bytes | None], tree_nodes: Mapping[bytes, bytes]) -> None:
        """Write one block's changes atomically; StorageFailed (nothing written) when the disk refuses."""
        try:
            self._write(writes, tree_nodes)
        except (lmdb.Error, OSError) as exc:  # ENOSPC shows as EIO; the transaction was aborted whole
            raise StorageFailed(f"{type(exc).__name__}: {exc}") from exc

    def _write(self, writes: Mapping[bytes, bytes | None], tree_nodes: Mapping[bytes, bytes]) -> None:
        with self._env.begin(write=True) as txn:
            state_cursor = txn.cursor(db=self._state)
            puts = sorted((k, v) for k, v in writes.items() if v is not None)
            if puts:
                state_cursor.putmulti(puts)
            for key, value in writes.items():
                if value is None:
                    txn.delete(key, db=self._state)
            if tree_nodes:
                tree_cursor = txn.cursor(db=self._tree)
                tree_cursor.putmulti(sorted(tree_nodes.items()), overwrite=False)

    def copy_to(self, dest: Path | str) -> None:
        """A consistent, compacted copy of the whole environment (snapshots)."""
        Path(dest).mkdir(parents=True, exist_ok=True)
        self._env.copy(str(dest), compact=True)

    def entry_count(self) -> int:
        with self._env.begin() as txn:
            return int(txn.stat(self._state)["entries"])

    def close(self) -> None:
        self._env.close()
