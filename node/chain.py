"""The chain on disk: an LMDB store plus the parameters it was created with.

`Chain` is what the node (and tests, benchmarks, snapshots) use: it opens or
creates the store, builds or applies blocks against its committed state and
commits each block's writes and tree nodes in one LMDB transaction.

Only a directory that has never held a store is initialised; any other is checked first
(node.storage.integrity) and refused with StoreRefused when damaged or foreign. Reads verify what is
content-addressed; a failed check, or a tree or decode error on stored data, latches the store's fault and
raises DataCorrupted, and every later read does too.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType

from google.protobuf.message import DecodeError

from chain.v1 import block_pb2
from chain.v1 import message_pb2 as pb
from node.constants import TREE_CACHE_NODES
from node.crypto.ed25519 import Ed25519Verifier
from node.errors import DataCorrupted, InvariantBroken
from node.merkle import InProcessUpdater, InvalidChange, MerkleError, NodeStore, TreeUpdater
from node.merkle.store import ReadNodes, RecentNodes
from node.params import ChainParams
from node.query.heads import HeadMemo
from node.state.access import StateAccess
from node.state.transition import BlockOutput, apply_block, apply_write_set, build_block, genesis_writes
from node.state.writeset import decode_write_set
from node.storage import schema
from node.storage.fault import StoreFault
from node.storage.identity import write_identity_file
from node.storage.integrity import (
    CHECKED_KEYS,
    REMEDY_FOREIGN,
    check_contents,
    check_files,
    identity_of,
    is_fresh,
    refuse,
)
from node.storage.kv import Overlay
from node.storage.lmdb_store import LmdbNodeView, LmdbReadView, LmdbStore, ReadSnapshot
from node.storage.retention import StateHistory
from node.storage.seal import break_seal, write_seal
from node.storage.writer import WriteDamaged, WriterLost, WriterProcess

log = logging.getLogger("chain.store")


def refuse_if_latched(fault: StoreFault) -> None:
    """DataCorrupted at once when the store already failed an integrity check: no read starts."""
    if fault.problem is not None:
        raise DataCorrupted(fault.problem)


def damage_of(exc: BaseException, fault: StoreFault) -> DataCorrupted | None:
    """What a read that raised `exc` says about the store: DataCorrupted (latched in `fault`) for a missing or
    malformed tree node, a value that does not match its leaf, or a stored record that does not parse; None
    for anything else (raised as it is)."""
    if isinstance(exc, InvalidChange):
        return None
    if isinstance(exc, MerkleError):
        return fault.record(str(exc))
    if isinstance(exc, DecodeError):
        return fault.record(f"a stored record does not decode: {exc}")
    return None


def _memo_store(path: Path | str, **options: bool) -> tuple[LmdbStore, HeadMemo]:
    """The store at `path`, checking every record it reads through a new head memo (and that memo)."""
    heads = HeadMemo()
    return LmdbStore(path, check=heads.check, checked=CHECKED_KEYS, **options), heads


class Reading:
    """`Chain.read()`: one LMDB read transaction and its views, with the store's fault check on the way in
    and the damage mapping of `Chain.guarded` on the way out. A class rather than two stacked generator
    context managers: every read RPC opens one (3.7 -> 1.5 us each)."""

    __slots__ = ("_snapshot", "_store")

    def __init__(self, store: LmdbStore) -> None:
        self._store = store
        self._snapshot: ReadSnapshot | None = None

    def __enter__(self) -> tuple[LmdbReadView, LmdbNodeView]:
        refuse_if_latched(self._store.fault)
        snapshot = self._snapshot = self._store.begin_read()
        return snapshot.view, snapshot.nodes

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        snapshot = self._snapshot
        if snapshot is not None:
            self._snapshot = None
            snapshot.close()
        if isinstance(exc, Exception):
            damage = damage_of(exc, self._store.fault)
            if damage is not None:
                raise damage from None


class Chain:
    def __init__(
        self,
        store: LmdbStore,
        params: ChainParams,
        heads: HeadMemo | None = None,
        *,
        tree_cache_nodes: int = TREE_CACHE_NODES,
        history: StateHistory | None = None,
    ) -> None:
        """`heads`: the memo whose `check` the store runs on every record it reads (node/query/heads.py), as
        `open`, `open_reader` and `_create` build it (`_memo_store`); without one, a fresh memo that only
        decodes the head (a store opened elsewhere, with its own check). `tree_cache_nodes`: how many of the
        tree nodes the latest blocks created stay in memory for the next blocks' updates. `history`: the
        state trees the store keeps (node/storage/retention.py); older stale nodes are collected after each
        commit, by whoever commits."""
        self.store = store
        self.history = history or StateHistory()
        self.params = params
        self.heads = heads or HeadMemo()
        self.verifier = Ed25519Verifier()
        # the tree nodes the latest blocks committed: building the next block reads them from memory
        self.recent_nodes = RecentNodes(tree_cache_nodes)
        # the tree nodes reads (proofs) fetched and checked: the next walk from any head reads them from memory
        self.read_nodes = ReadNodes()
        self.writer: WriterProcess | None = None  # None: commits run in this process (the caller's thread)

    def start_writer(self) -> WriterProcess:
        """Commit through a writer process from now on (node/storage/writer.py). Call it from the thread
        that lives as long as the node (the main thread): the child is killed when that thread ends."""
        if self.writer is None:
            self.writer = WriterProcess(
                self.store.path,
                sync=self.store.sync,
                on_restart=self.store.clear_stale_readers,
                tree_cache_nodes=self.recent_nodes.capacity,
                history=self.history,
            )
        return self.writer

    @classmethod
    def open(
        cls,
        path: Path | str,
        params: ChainParams | None = None,
        *,
        sync: bool = True,
        tree_cache_nodes: int = TREE_CACHE_NODES,
        history: StateHistory | None = None,
    ) -> Chain:
        """Open a chain directory; one that never held a store is initialised with `params` (default:
        devnet). StoreRefused when the store is damaged, or holds a chain of other genesis parameters."""
        path = Path(path)
        if is_fresh(path):
            return cls._create(path, params or ChainParams(), sync, tree_cache_nodes, history)
        file_identity = check_files(path)  # before LMDB maps the file
        break_seal(path)  # from here only a clean close (Chain.close) says the file is sound
        store, heads = _memo_store(path, sync=sync)
        try:
            contents = check_contents(store, file_identity)
            if params is not None and params != contents.params:
                problem = f"holds a {contents.identity.describe()}, not the expected {identity_of(params).describe()}"
                raise refuse(path, problem, REMEDY_FOREIGN)
        except BaseException:
            store.close()
            raise
        if not contents.recorded:  # a store from before identities, or of format 1: adopt it as this node writes
            store.commit({schema.meta_key(schema.META_IDENTITY): contents.identity.encode()}, {})
        if file_identity != contents.identity:  # none yet, or of the format before
            write_identity_file(path, contents.identity)
        return cls(store, contents.params, heads, tree_cache_nodes=tree_cache_nodes, history=history)

    @classmethod
    def open_reader(cls, path: Path | str) -> Chain:
        """The store of a running node opened read-only (a read worker, node/server/readers): it cannot
        write; each read sees the newest block the node committed. StoreRefused as `open` when damaged."""
        store, heads = _memo_store(path, readonly=True)
        try:
            contents = check_contents(store, None)
        except BaseException:
            store.close()
            raise
        return cls(store, contents.params, heads)

    @classmethod
    def _create(
        cls, path: Path, params: ChainParams, sync: bool, tree_cache_nodes: int, history: StateHistory | None
    ) -> Chain:
        """Genesis in one transaction (with the identity record), then the identity file beside it."""
        identity = identity_of(params)
        store, heads = _memo_store(path, sync=sync)
        writes = genesis_writes(params)
        writes[schema.meta_key(schema.META_IDENTITY)] = identity.encode()
        store.commit(writes, {})
        write_identity_file(path, identity)
        return cls(store, params, heads, tree_cache_nodes=tree_cache_nodes, history=history)

    def read(self) -> Reading:
        """A consistent read (`with chain.read() as (view, nodes)`); DataCorrupted once the store failed an
        integrity check (now or before)."""
        return Reading(self.store)

    @contextmanager
    def guarded(self) -> Iterator[None]:
        """Reads of stored data inside (any snapshot of this store): DataCorrupted, latched, on a damaged
        tree node or record; DataCorrupted at once when the store already failed an integrity check."""
        fault = self.store.fault
        refuse_if_latched(fault)
        try:
            yield
        except Exception as exc:
            damage = damage_of(exc, fault)
            if damage is None:
                raise
            raise damage from None

    def head(self) -> block_pb2.Block:
        with self.read() as (view, _):
            head = StateAccess(Overlay(view)).head()
        if head is None:
            raise InvariantBroken("the store has no genesis block")
        return head

    @property
    def height(self) -> int:
        return int(self.head().header.number)

    def tree_nodes(self, nodes: NodeStore) -> TreeUpdater:
        """What runs the next block's state-tree update (the transition's one `nodes`): with a writer process,
        the writer itself (the update runs there, over its store and its memo of the latest blocks' nodes,
        which it holds until the commit); without, an update in this process over a snapshot's tree `nodes`,
        the latest blocks' nodes answered from memory."""
        if self.writer is not None:
            return self.writer
        return InProcessUpdater(self.recent_nodes.over(nodes))

    def read_tree(self, nodes: NodeStore) -> NodeStore:
        """A snapshot's tree nodes for reads: nodes earlier reads checked are answered from memory (only
        reads fill it; `tree_nodes` is what updates read)."""
        return self.read_nodes.over(nodes)

    def build(self, timestamp_ms: int, candidates: Sequence[pb.Message], *, verify: bool = False) -> BlockOutput:
        with self.read() as (view, nodes):
            return build_block(
                view,
                self.tree_nodes(nodes),
                self.params,
                timestamp_ms,
                candidates,
                verifier=self.verifier if verify else None,
            )

    def apply(self, block: block_pb2.Block, *, verify: bool = True) -> BlockOutput:
        with self.read() as (view, nodes):
            verifier = self.verifier if verify else None
            return apply_block(view, self.tree_nodes(nodes), self.params, block, verifier=verifier)

    def apply_writes(self, block: block_pb2.Block, write_set: bytes) -> BlockOutput:
        """`block` applied by the write set its leader's execution made (node/state/writeset.py), without
        executing its messages: the tree is updated from the changed keys here and the state root checked
        against the header; InvalidBlock when the write set is malformed or does not reproduce the header."""
        writes = decode_write_set(int(block.header.number), write_set)
        with self.read() as (view, nodes):
            return apply_write_set(view, self.tree_nodes(nodes), self.params, block, writes)

    def commit(self, output: BlockOutput) -> None:
        """Write one block atomically. The caller serialises commits (one writer)."""
        number = int(output.block.header.number)
        if number != self.height + 1:
            raise InvariantBroken(f"block {number} does not follow {self.height}")
        if self.writer is None:  # the nodes came placed from the update `tree_nodes` ran here
            placed = output.tree_nodes.here()
            self.store.commit(output.writes, placed, number)
            self.recent_nodes.add(placed)  # after the transaction: never a node of a block not committed
            self.prune(number)
        else:  # the writer's memo takes them (`tree_nodes` reads this chain's only without a writer)
            self._commit_in_writer(output)

    def prune(self, head: int) -> int:
        """Collect, in this process, the stale tree nodes the retained trees at `head` no longer need (at most
        one batch; the writer process does this itself after each commit it answers). How many were."""
        return self.history.collect(self.store, head)

    def _commit_in_writer(self, output: BlockOutput) -> None:
        """A writer that died is replaced once at once (a second loss in a row is StorageFailed)."""
        assert self.writer is not None
        number = output.block.header.number
        for attempt in (1, 2):
            try:
                self.writer.commit(output.writes, output.tree_nodes, number)
                return
            except WriterLost as lost:
                # the transaction is atomic: the block is wholly stored or not at all. The head tells which;
                # a block retried after it was stored would not follow the head any more.
                if bytes(self.head().hash) == bytes(output.block.hash):
                    log.warning("%s; block %d was stored before it exited", lost, number)
                    return
                if attempt == 2:
                    raise
                log.warning("%s; block %d was not stored: committing it again in a new writer", lost, number)
            except WriteDamaged as damaged:
                raise self.store.fault.record(damaged.problem) from None

    def close(self) -> None:
        """Stop the writer, close the store and, when nothing failed, seal it (node/storage/seal.py): the next
        start skips the page walk while nobody writes the file. A writer that had to be killed, a latched
        fault or a failed seal leaves none, and the next start walks."""
        clean = self.writer.close() if self.writer is not None else True
        self.writer = None
        txnid = None if self.store.readonly else self.store.last_txnid()
        self.store.close()
        if clean and txnid is not None and self.store.fault.problem is None:
            try:
                write_seal(self.store.path, txnid)
            except OSError as err:  # a full disk: the next start walks
                log.warning("store not sealed (%s): the next start reads every page", err)
