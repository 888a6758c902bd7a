"""The embedded store: LMDB on disk.

Four named databases: `state` (every key built by node.storage.schema),
`nodes` (the sparse Merkle tree's nodes, each under the block that stored it:
node/storage/tree_layout.py), `stale` (the nodes each block replaced, by that
block: node/storage/retention.py) and `tree` (the nodes of stores written
before the block layout, by hash; read, never written). A block's writes,
including its tree nodes and stale entries, go in one write transaction, so a
crash leaves the store exactly at the previous block; collecting stale nodes
(`prune`) takes transactions of its own.

Integrity: an LMDB error that means a damaged file, a tree node that does not hash to its name, or a record
that fails the store's `check` (node.storage.integrity.check_record: blocks) is latched in the store's
`fault` (one log line) and raised as DataCorrupted: never handed on as data.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from operator import itemgetter
from pathlib import Path
from typing import Any, cast

import lmdb
from blake3 import blake3

from node.errors import StatePruned, StorageFailed
from node.merkle.update import STALE_NODE, STALE_ROOT, Placed
from node.storage import schema
from node.storage.fault import StoreFault
from node.storage.kv import prefix_end
from node.storage.tree_layout import LEGACY

DEFAULT_MAP_SIZE = 64 * 1024**3
# LMDB errors that mean the file is damaged (not a full disk, a full map, a busy reader table, a failed
# write that left the environment in panic, or a caller's mistake: those are StorageFailed or bugs).
DAMAGE_ERRORS = (lmdb.CorruptedError, lmdb.PageNotFoundError, lmdb.InvalidError, lmdb.VersionMismatchError)
RecordCheck = Callable[[bytes, bytes], str | None]
"""(key, value) -> None when sound, else what is wrong."""
EVERY_KEY = (b"",)  # the keys a check looks at, when it does not say (node.storage.integrity.CHECKED_KEYS)


@dataclass(frozen=True)
class CheckScope:
    """The keys a record check looks at (`keys`: prefixes), made once per store, not per read."""

    keys: tuple[bytes, ...]
    firsts: frozenset[bytes] | None  # a scan prefix starting with none of these bytes reaches no such key

    @classmethod
    def of(cls, keys: tuple[bytes, ...]) -> CheckScope:
        firsts = frozenset(k[:1] for k in keys)
        return cls(keys, None if b"" in firsts else firsts)  # None: every scan may reach one


EVERY = CheckScope.of(EVERY_KEY)
PRUNED_KEY = schema.meta_key(schema.META_PRUNED)


class LmdbReadView:
    """A ReadView over one LMDB read transaction."""

    __slots__ = ("_check", "_checked_firsts", "_checked_keys", "_db", "_fault", "_txn")

    def __init__(
        self,
        txn: Any,
        db: Any,
        fault: StoreFault | None = None,
        check: RecordCheck | None = None,
        scope: CheckScope = EVERY,
    ) -> None:
        """`check` runs on the records whose keys start with one of `scope.keys` (it passes every other)."""
        self._txn = txn
        self._db = db
        self._fault = fault or StoreFault(Path("?"))
        self._check = check
        self._checked_keys = scope.keys
        self._checked_firsts = scope.firsts

    def get(self, key: bytes) -> bytes | None:
        try:  # arguments by position: py-lmdb's keyword parsing costs ~1k instructions a call
            value: bytes | None = self._txn.get(key, None, self._db)
        except DAMAGE_ERRORS as err:
            raise self._fault.record(f"LMDB: {err}") from None
        if value is not None and self._check is not None and key.startswith(self._checked_keys):
            self._checked(self._check, key, value)
        return value

    def snapshot_id(self) -> int:
        """The id of the last write transaction committed before this read began: equal ids, equal stores."""
        snapshot: int = self._txn.id()
        return snapshot

    def scan(self, prefix: bytes, start: bytes | None = None, reverse: bool = False) -> Iterator[tuple[bytes, bytes]]:
        # one generator for the forward scan (every listing and every GetAccount runs several): no inner
        # generator to resume per item
        check = self._check
        firsts = self._checked_firsts
        if firsts is not None and prefix and prefix[:1] not in firsts:
            check = None  # no key under this prefix is one the check looks at
        try:
            cursor = self._txn.cursor(self._db)
            if reverse:
                for key, value in self._scan_reverse(cursor, prefix, start):
                    if check is not None:
                        self._checked(check, key, value)
                    yield key, value
                return
            if not cursor.set_range(start if start is not None and start > prefix else prefix):
                return
            for key, value in cursor:  # bytes: the transaction is not a buffers one
                if not key.startswith(prefix):
                    return
                if check is not None:
                    self._checked(check, key, value)
                yield key, value
        except DAMAGE_ERRORS as err:
            raise self._fault.record(f"LMDB: {err}") from None

    def _checked(self, check: RecordCheck, key: bytes, value: bytes) -> None:
        problem = check(key, value)
        if problem is not None:
            raise self._fault.record(problem)

    @staticmethod
    def _scan_reverse(cursor: Any, prefix: bytes, start: bytes | None) -> Iterator[tuple[bytes, bytes]]:
        if start is not None:
            if cursor.set_range(start):
                if cursor.key() != start and not cursor.prev():
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
            key = cursor.key()
            if not key.startswith(prefix):
                if key < prefix:
                    return
            else:
                yield key, cursor.value()
            if not cursor.prev():
                return


class LmdbNodeView:
    """Tree-node lookups by hash within one LMDB transaction; every node read is checked against its hash.

    Each node is looked up where it is stored (node/storage/tree_layout.py): where its parent says (`at`, as a
    walk carries it down); a walk's root by its location record in `state`; a node of a format-1 store, or a
    root without a record, in the hash-keyed `legacy` database. It returns the stored form (an internal node
    may carry its children's locations after its 65-byte encoding)."""

    __slots__ = ("_db", "_fault", "_legacy", "_state", "_txn")

    def __init__(
        self, txn: Any, db: Any, fault: StoreFault | None = None, *, legacy: Any = None, state: Any = None
    ) -> None:
        """`db`: the `nodes` database (None: a store with none yet); `legacy`: the `tree` database (None: none);
        `state`: the database of the roots' location records (None: every root is legacy).

        A walk's root (`at=None`) that has no location record and is not a legacy node, in a store that has
        collected stale nodes, raises StatePruned: its tree is not kept (node/storage/retention.py)."""
        self._txn = txn
        self._db = db
        self._legacy = legacy
        self._state = state
        self._fault = fault or StoreFault(Path("?"))

    def get(self, node_hash: bytes, at: bytes | None = None) -> bytes | None:
        txn = self._txn
        try:  # arguments by position, as in LmdbReadView.get
            root = at is None
            if at is None:
                at = self.root_location(node_hash)
            if at != LEGACY:
                value: bytes | None = txn.get(schema.tree_node_key(at, node_hash), None, self._db)
            else:
                value = None if self._legacy is None else txn.get(node_hash, None, self._legacy)
            if value is None and root:
                self._not_kept(node_hash)
        except DAMAGE_ERRORS as err:
            raise self._fault.record(f"LMDB: {err}") from None
        if value is not None and blake3(value[:65]).digest() != node_hash:  # bytes: no transaction is a buffers one
            raise self._fault.record(f"tree node {node_hash.hex()[:16]} does not hash to its name")
        return value

    def root_location(self, root: bytes) -> bytes:
        """Where a state root's node is: its location record, else LEGACY (by hash)."""
        if self._state is None or self._db is None:
            return LEGACY
        raw: bytes | None = self._txn.get(schema.tree_root_key(root), None, self._state)
        return LEGACY if raw is None else raw

    def _not_kept(self, root: bytes) -> None:
        """StatePruned when the store has collected stale nodes: a root it has no record of is one whose
        record went with its tree (or that never was a root here: either way, not a tree it keeps)."""
        if self._state is None:
            return
        raw: bytes | None = self._txn.get(PRUNED_KEY, None, self._state)
        if raw is not None:
            raise StatePruned(root, int.from_bytes(raw, "big"))

    def present(self, node_hash: bytes, location: bytes) -> bool:
        """Is a node stored under this name at this location (unchecked: verify-store checks every node)?"""
        db = self._legacy if location == LEGACY else self._db
        key = node_hash if location == LEGACY else schema.tree_node_key(location, node_hash)
        return db is not None and self._txn.get(key, None, db) is not None


def _stale_entries(block: int, stale: list[tuple[bytes, bytes, int]]) -> list[tuple[bytes, bytes]]:
    """A block's index entries for what its update replaced (merkle.Placed.stale), sorted."""
    entries = []
    for at, node_hash, flags in stale:
        if flags & STALE_ROOT:
            entries.append((schema.stale_key(block, schema.STALE_ROOT_RECORD, at, node_hash), b""))
        if flags & STALE_NODE:
            entries.append((schema.stale_key(block, schema.STALE_TREE_NODE, at, node_hash), b""))
    entries.sort()
    return entries


class ReadSnapshot:
    """An open read transaction and its views."""

    __slots__ = ("_txn", "nodes", "view")

    def __init__(self, txn: Any, view: LmdbReadView, nodes: LmdbNodeView) -> None:
        self._txn = txn
        self.view = view
        self.nodes = nodes

    def close(self) -> None:
        self._txn.abort()


class LmdbStore:
    """Owns the LMDB environment."""

    def __init__(
        self,
        path: Path | str,
        *,
        map_size: int = DEFAULT_MAP_SIZE,
        sync: bool = True,
        check: RecordCheck | None = None,
        checked: tuple[bytes, ...] = EVERY_KEY,
        readonly: bool = False,
    ) -> None:
        """`check`: the content check applied to the state records read whose keys start with one of
        `checked` (None: none; node.storage.integrity.CHECKED_KEYS for check_record). `readonly`: an
        environment that cannot begin a write transaction (read workers beside the node's own process:
        LMDB serves many reader processes, each read transaction sees the newest committed block)."""
        self.path = Path(path)
        self.sync = sync
        self.readonly = readonly
        self.fault = StoreFault(self.path)
        self._check = check
        self._scope = CheckScope.of(checked)
        if not readonly:
            self.path.mkdir(parents=True, exist_ok=True)
        self._env = lmdb.open(
            str(self.path),
            map_size=map_size,
            max_dbs=8,
            sync=sync,
            metasync=sync,
            readahead=False,
            max_readers=512,
            readonly=readonly,
        )
        self._state = self._env.open_db(b"state", create=not readonly)
        self._tree = self._open_db(b"tree", readonly)  # the nodes of format 1, by hash (read, never written)
        self._nodes = self._open_db(b"nodes", readonly)  # every node stored since, by block and hash
        self._stale = self._open_db(b"stale", readonly)  # the nodes each block replaced, by that block

    def _open_db(self, name: bytes, readonly: bool) -> Any:
        """A named database; None when a read-only environment has none (a store of an older format)."""
        try:
            return self._env.open_db(name, create=not readonly)
        except lmdb.NotFoundError:
            return None

    @contextmanager
    def read(self) -> Iterator[tuple[LmdbReadView, LmdbNodeView]]:
        """A consistent snapshot: state view and tree-node view of one transaction."""
        with self._env.begin() as txn:
            yield self._views(txn)

    def _views(self, txn: Any) -> tuple[LmdbReadView, LmdbNodeView]:
        view = LmdbReadView(txn, self._state, self.fault, self._check, self._scope)
        return view, LmdbNodeView(txn, self._nodes, self.fault, legacy=self._tree, state=self._state)

    def begin_read(self) -> ReadSnapshot:
        """A long-lived read snapshot (close it when done): the mempool validates against one."""
        txn = self._env.begin()
        return ReadSnapshot(txn, *self._views(txn))

    def commit(
        self, writes: Mapping[bytes, bytes | None], tree_nodes: Mapping[bytes, bytes], block: int | None = None
    ) -> None:
        """Write one block's changes atomically; StorageFailed (nothing written) when the disk refuses,
        DataCorrupted (latched) when LMDB finds the file damaged. `tree_nodes`: the nodes block number `block`
        stored (hash -> stored form), put under `schema.tree_node_key` in the `nodes` database."""
        if tree_nodes and block is None:
            raise ValueError("tree nodes are stored under the number of the block that stores them")
        try:
            self._write(writes, tree_nodes, block)
        except DAMAGE_ERRORS as err:
            raise self.fault.record(f"LMDB: {err}") from None
        except (lmdb.Error, OSError) as exc:  # ENOSPC shows as EIO; the transaction was aborted whole
            raise StorageFailed(f"{type(exc).__name__}: {exc}") from exc

    def _write(
        self, writes: Mapping[bytes, bytes | None], tree_nodes: Mapping[bytes, bytes], block: int | None
    ) -> None:
        deletes = None in writes.values()  # rare: most blocks only put, and skip the second pass
        # in key order, so LMDB walks its B-tree forward (keys are unique: the values are never compared)
        # (sorted by the key alone: comparing the pairs as tuples costs half as much again)
        if deletes:
            puts = sorted(((k, v) for k, v in writes.items() if v is not None), key=itemgetter(0))
        else:  # no None among the values
            puts = sorted(cast(Mapping[bytes, bytes], writes).items(), key=itemgetter(0))
        with self._env.begin(write=True) as txn:
            state_cursor = txn.cursor(db=self._state)
            if puts:
                state_cursor.putmulti(puts)
            if deletes:
                for key, value in writes.items():
                    if value is None:
                        txn.delete(key, db=self._state)
            if tree_nodes and block is not None:  # under the block's number: after every node stored before
                here = schema.u64(block)
                nodes = [(schema.tree_node_key(here, h), tree_nodes[h]) for h in sorted(tree_nodes)]
                txn.cursor(db=self._nodes).putmulti(nodes, append=True)
            stale = tree_nodes.stale if isinstance(tree_nodes, Placed) else None
            if stale and block is not None:  # under the block's number: after every entry indexed before
                txn.cursor(db=self._stale).putmulti(_stale_entries(block, stale), append=True)

    def prune(self, horizon: int, batch: int) -> int:
        """Collect what blocks up to `horizon` made stale, at most `batch` index entries in one write
        transaction, in index order: a block's replaced root loses its location record (unless a later block
        made the same root again elsewhere) before any of that block's stale nodes go, so a root that still
        has its record is whole. Records the newest block reached (schema.META_PRUNED): from then on a walk
        from a root without a record raises StatePruned. The number of entries collected (`batch`: call
        again)."""
        if self._stale is None or self._nodes is None:
            return 0
        limit = schema.u64(horizon + 1)
        done = 0
        try:
            with self._env.begin(write=True) as txn:
                cursor = txn.cursor(db=self._stale)
                nodes, state = self._nodes, self._state
                found = cursor.first()
                since = b""
                while found and done < batch:
                    key = cursor.key()
                    since = key[:8]
                    if since >= limit:
                        break
                    kind, location, node_hash = key[8:9], key[9:17], key[17:]
                    if kind == schema.STALE_TREE_NODE:
                        txn.delete(schema.tree_node_key(location, node_hash), db=nodes)
                    else:
                        record = schema.tree_root_key(node_hash)
                        if txn.get(record, db=state) == location:
                            txn.delete(record, db=state)
                    found = cursor.delete()  # and on to the next entry
                    done += 1
                if done:
                    txn.put(PRUNED_KEY, since if since < limit else schema.u64(horizon), db=state)
        except DAMAGE_ERRORS as err:
            raise self.fault.record(f"LMDB: {err}") from None
        except (lmdb.Error, OSError) as exc:  # the transaction was aborted whole: the next one starts over
            raise StorageFailed(f"{type(exc).__name__}: {exc}") from exc
        return done

    def stale_index(self) -> list[bytes]:
        """The stale index's keys (schema.stale_key), in order (tests and tools)."""
        if self._stale is None:
            return []
        with self._env.begin() as txn:
            return [key for key, _ in txn.cursor(db=self._stale).iternext()]

    def tree_node_keys(self) -> list[bytes]:
        """The `nodes` database's keys (schema.tree_node_key: location, then hash), in order."""
        if self._nodes is None:
            return []
        with self._env.begin() as txn:
            return [key for key, _ in txn.cursor(db=self._nodes).iternext()]

    def stale_count(self) -> int:
        """How many replaced nodes are indexed and not collected yet."""
        if self._stale is None:
            return 0
        with self._env.begin() as txn:
            return int(txn.stat(self._stale)["entries"])

    def copy_to(self, dest: Path | str) -> None:
        """A consistent, compacted copy of the whole environment (snapshots)."""
        Path(dest).mkdir(parents=True, exist_ok=True)
        self._env.copy(str(dest), compact=True)

    def tree_nodes(self) -> Iterator[tuple[bytes, bytes]]:
        """Every stored tree node (hash, stored form), unchecked: verify-store checks them itself. The
        legacy ones (by hash) first, then the rest in the order the blocks stored them."""
        with self._env.begin() as txn:
            if self._tree is not None:
                yield from txn.cursor(db=self._tree).iternext()
            if self._nodes is not None:
                for key, value in txn.cursor(db=self._nodes).iternext():
                    yield key[8:], value

    def tree_node_count(self) -> int:
        with self._env.begin() as txn:
            return sum(int(txn.stat(db)["entries"]) for db in (self._tree, self._nodes) if db is not None)

    def entry_count(self) -> int:
        with self._env.begin() as txn:
            return int(txn.stat(self._state)["entries"])

    def last_txnid(self) -> int | None:
        """The id of the newest committed write transaction (what the file's newer meta page holds); None once
        the environment is closed."""
        try:
            return int(self._env.info()["last_txnid"])
        except lmdb.Error:
            return None

    def clear_stale_readers(self) -> int:
        """Free the reader slots of processes that died inside a read transaction (a killed read worker):
        a stale slot would keep the pages of its old snapshot from being reused. The number freed."""
        return int(self._env.reader_check())

    def close(self) -> None:
        self._env.close()
