"""Content-addressed node stores: a node's bytes are kept under its hash, and nothing is ever overwritten.

Old nodes are never deleted, so every past root stays readable (snapshots, stale-proof checks). There is no
garbage collection yet: the node store only grows, by the nodes each `UpdateResult` hands back.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Protocol

import lmdb

from node.merkle.codec import Node, decode
from node.merkle.errors import CorruptNode, MissingNode


class NodeStore(Protocol):
    def get(self, node_hash: bytes) -> bytes | None:
        """The encoded node stored under `node_hash`, or None."""
        ...


class DictNodeStore:
    """In-memory store for tests and tools."""

    def __init__(self, nodes: Mapping[bytes, bytes] | None = None) -> None:
        self._nodes: dict[bytes, bytes] = dict(nodes) if nodes else {}

    def get(self, node_hash: bytes) -> bytes | None:
        return self._nodes.get(node_hash)

    def put_nodes(self, nodes: Mapping[bytes, bytes]) -> None:
        self._nodes.update(nodes)

    def __len__(self) -> int:
        return len(self._nodes)


class LmdbNodeStore:
    """Nodes in an LMDB database, read (and written) through a transaction the caller owns.

    `prefix` lets the node schema share a database with other entities (the storage schema module decides
    it); with a dedicated named database it stays empty.
    """

    def __init__(self, txn: lmdb.Transaction, db: lmdb._Database | None = None, *, prefix: bytes = b"") -> None:
        self._txn = txn
        self._db = db
        self._prefix = prefix

    def get(self, node_hash: bytes) -> bytes | None:
        data = self._txn.get(self._prefix + node_hash, db=self._db)
        return None if data is None else bytes(data)

    def put_nodes(self, nodes: Mapping[bytes, bytes]) -> int:
        """Write new nodes (the transaction must be a write transaction); returns how many were new."""
        prefix = self._prefix
        with self._txn.cursor(db=self._db) as cursor:
            _consumed, added = cursor.putmulti(
                ((prefix + h, data) for h, data in nodes.items()), dupdata=False, overwrite=False
            )
        return int(added)


@contextmanager
def open_lmdb_store(
    env: lmdb.Environment, db: lmdb._Database | None = None, *, write: bool = False, prefix: bytes = b""
) -> Iterator[LmdbNodeStore]:
    """An `LmdbNodeStore` over its own transaction: committed on success (write), aborted on error."""
    txn = env.begin(db=db, write=write)
    try:
        yield LmdbNodeStore(txn, db, prefix=prefix)
    except BaseException:
        txn.abort()
        raise
    txn.commit()


def load_node(store: NodeStore, node_hash: bytes) -> Node:
    """Fetch and decode a node that must exist (the caller never passes EMPTY)."""
    data = store.get(node_hash)
    if data is None:
        raise MissingNode(node_hash)
    node = decode(data)
    if node is None:
        raise CorruptNode(node_hash, "not a 65-byte leaf or internal encoding")
    return node
