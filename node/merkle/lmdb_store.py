"""The Merkle node store on LMDB (the node's backend; see node.merkle.store for the contract).

Kept apart from node.merkle.store so that importing the tree or verifying proofs never loads LMDB.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager

import lmdb


class LmdbNodeStore:
    """Nodes in an LMDB database, read (and written) through a transaction the caller owns.

    `prefix` lets the node schema share a database with other entities (the storage schema module decides
    it); with a dedicated named database it stays empty.
    """

    def __init__(self, txn: lmdb.Transaction, db: lmdb._Database | None = None, *, prefix: bytes = b"") -> None:
        self._txn = txn
        self._db = db
        self._prefix = prefix

    def get(self, node_hash: bytes, at: bytes | None = None) -> bytes | None:
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
