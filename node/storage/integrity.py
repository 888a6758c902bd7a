"""Is this store sound, and is it the one we expect? Checked before serving, and on every cheap read.

Start-up (`check_files` before LMDB maps the file, `check_contents` right after):
1. `data.mdb` is present whenever the directory has held a store;
2. LMDB's own structure, read with plain file I/O (node.storage.lmdb_file): meta pages, length, and every
   page, unless the file is exactly as a clean close left it (node.storage.seal);
3. the genesis record, block 0 and the identity record agree, and match `store-identity.json`;
4. the head block hashes to its hash, is stored under its number, and its last `HEAD_CHAIN_DEPTH`
   ancestors link by parent hash; the head state root's tree node is present and hashes to its name.

Serving: blocks and tree nodes are content-addressed, so `check_record` (blocks, the head record) and the
node view (tree nodes) verify them on every read; a mismatch latches `StoreFault` (one log line) and
raises `DataCorrupted`. `check_store(path)` runs the start-up checks on a closed store (restores use it).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from google.protobuf.message import DecodeError

from chain.v1 import block_pb2
from node.block import genesis_block, header_hash
from node.errors import DataCorrupted, StoreRefused
from node.merkle.codec import EMPTY
from node.params import ChainParams
from node.storage import chainlog, schema
from node.storage.fault import REMEDY_DAMAGED
from node.storage.identity import (
    DATA_FILE,
    FORMAT_VERSION,
    IDENTITY_FILE,
    LOCK_FILE,
    READABLE_FORMATS,
    IdentityUnreadable,
    StoreIdentity,
    network_name,
    read_identity_file,
)
from node.storage.lmdb_file import LmdbFileDamaged, read_meta, walk
from node.storage.lmdb_store import LmdbNodeView, LmdbReadView, LmdbStore
from node.storage.seal import is_sealed

HEAD_CHAIN_DEPTH = 64
TREE_DB = b"tree"
NODES_DB = b"nodes"
HEAD_KEY = schema.meta_key(schema.META_HEAD)
BLOCK_PREFIX = schema.blocks_prefix()
CHECKED_KEYS = (BLOCK_PREFIX, HEAD_KEY)  # the keys check_record looks at: it passes every other record unread
REMEDY_FOREIGN = "point --data-dir at this network's store, or start over with --reinitialize (moves it aside)"


def is_fresh(data_dir: Path) -> bool:
    """Whether the directory has never held a store (no data file, lock file or identity file)."""
    return not any((data_dir / name).exists() for name in (DATA_FILE, LOCK_FILE, IDENTITY_FILE))


def check_block(number: int | None, raw: bytes) -> str | None:
    """None when the stored block hashes to its hash (and sits under its own number), else the problem."""
    try:
        block = chainlog.block_shell(raw) if number is not None else block_pb2.Block.FromString(raw)
    except DecodeError:
        return f"block {number if number is not None else 'head'} does not decode"
    label = f"block {block.header.number}" if number is None else f"block {number}"
    if header_hash(block.header) != block.hash:
        return f"{label}: header does not hash to the block hash {block.hash.hex()[:16]}"
    if number is not None and block.header.number != number:
        return f"{label}: stored under {number} but numbered {block.header.number}"
    return None


def check_record(key: bytes, value: bytes) -> str | None:
    """The cheap content check of a state-database record (blocks and the head record)."""
    if key.startswith(BLOCK_PREFIX) and len(key) == len(BLOCK_PREFIX) + 8:
        return check_block(int.from_bytes(key[len(BLOCK_PREFIX) :], "big"), value)
    if key == HEAD_KEY:
        return check_block(None, value)
    return None


def identity_of(params: ChainParams) -> StoreIdentity:
    """The identity a store of these genesis parameters has."""
    return StoreIdentity(FORMAT_VERSION, network_name(params.network), bytes(genesis_block(params).hash))


def refuse(data_dir: Path, problem: str, remedy: str = REMEDY_DAMAGED) -> StoreRefused:
    return StoreRefused(str(data_dir), problem, remedy)


def check_files(data_dir: Path, *, deep: bool = False) -> StoreIdentity | None:
    """Steps 1-2 (nothing mapped): the identity file, if any. Raises StoreRefused. A store exactly as a clean
    close left it (node/storage/seal.py) gets the meta and length checks only; `deep` (verify-store) always
    walks, and also walks every node of every tree-database leaf page."""
    data = data_dir / DATA_FILE
    try:
        identity = read_identity_file(data_dir)
    except IdentityUnreadable as err:
        raise refuse(data_dir, f"{IDENTITY_FILE} is unreadable ({err})") from None
    if not data.exists():
        held = IDENTITY_FILE if identity is not None else LOCK_FILE
        raise refuse(data_dir, f"{DATA_FILE} is missing but this directory has held a store ({held} is there)")
    try:
        meta = read_meta(data)
        if deep or not is_sealed(data_dir, meta.txnid):
            walk(data, meta, shallow=frozenset() if deep else frozenset({TREE_DB, NODES_DB}))
    except LmdbFileDamaged as err:
        raise refuse(data_dir, f"{DATA_FILE} is damaged: {err}") from None
    except OSError as err:
        raise refuse(data_dir, f"{DATA_FILE} cannot be read: {err}") from None
    return identity


@dataclass(frozen=True)
class Contents:
    identity: StoreIdentity
    params: ChainParams
    head: block_pb2.Block
    recorded: bool  # the identity record is in the store as this node writes it (False: none yet, or of format 1)


def _load_head(data_dir: Path, view: LmdbReadView) -> block_pb2.Block:
    raw = view.get(HEAD_KEY)
    if raw is None:
        raise refuse(data_dir, "the store has no head block record (not a chain store, or damaged)")
    head = block_pb2.Block()
    head.ParseFromString(raw)
    return head


def _check_chain(data_dir: Path, view: LmdbReadView, head: block_pb2.Block) -> None:
    """The head is stored under its number, and its last HEAD_CHAIN_DEPTH ancestors link by parent hash."""
    number = int(head.header.number)
    child_parent: bytes | None = None
    for n in range(number, max(-1, number - HEAD_CHAIN_DEPTH - 1), -1):
        raw = view.get(schema.block_key(n))
        if raw is None:
            raise refuse(data_dir, f"block {n} is missing below the head {number}")
        block = chainlog.block_shell(raw)
        if n == number and block.hash != head.hash:
            problem = f"the head record names block {number} {head.hash.hex()[:16]}, the store holds another"
            raise refuse(data_dir, problem)
        if child_parent is not None and block.hash != child_parent:
            raise refuse(data_dir, f"block {n + 1} does not link to block {n} (parent hash mismatch)")
        child_parent = bytes(block.header.parent_hash)


def _check_root(data_dir: Path, nodes: LmdbNodeView, head: block_pb2.Block) -> None:
    root = bytes(head.header.state_root)
    if root != EMPTY and nodes.get(root) is None:
        raise refuse(data_dir, f"the head state root {root.hex()[:16]} is missing from the tree")


def _identity(data_dir: Path, view: LmdbReadView) -> tuple[StoreIdentity, ChainParams, bool]:
    """What the store is, from its genesis record and block 0, checked against its identity record."""
    raw = view.get(schema.meta_key(schema.META_GENESIS))
    if raw is None:
        raise refuse(data_dir, "the store has no genesis record (not a chain store, or damaged)")
    try:
        params = ChainParams.from_json(json.loads(raw))
    except (ValueError, KeyError, TypeError) as err:
        raise refuse(data_dir, f"the genesis record is unreadable ({err})") from None
    expected = genesis_block(params)
    block0 = view.get(schema.block_key(0))
    if block0 is None or chainlog.block_shell(block0).hash != expected.hash:
        raise refuse(data_dir, "block 0 is not the genesis block of the genesis record")
    identity = identity_of(params)
    recorded = view.get(schema.meta_key(schema.META_IDENTITY))
    if recorded is None:
        return identity, params, False
    try:
        stored = StoreIdentity.decode(recorded)
    except IdentityUnreadable as err:
        raise refuse(data_dir, f"the identity record is unreadable ({err})") from None
    if stored.format_version not in READABLE_FORMATS:
        readable = ", ".join(str(v) for v in READABLE_FORMATS)
        raise refuse(
            data_dir,
            f"store format version {stored.format_version}, this node reads {readable}",
            "run a chain-node release that reads it, or restore a snapshot made by this release",
        )
    if not stored.same_chain(identity):
        raise refuse(data_dir, f"the identity record ({stored.describe()}) disagrees with block 0")
    return identity, params, stored.format_version == FORMAT_VERSION


def check_contents(store: LmdbStore, file_identity: StoreIdentity | None) -> Contents:
    """Steps 3-4 on an open store (opened with `check=check_record`). Raises StoreRefused."""
    data_dir = store.path
    try:
        with store.read() as (view, nodes):
            identity, params, recorded = _identity(data_dir, view)
            head = _load_head(data_dir, view)
            _check_chain(data_dir, view, head)
            _check_root(data_dir, nodes, head)
    except (DataCorrupted, DecodeError) as err:
        raise refuse(data_dir, f"{DATA_FILE} is damaged: {err}") from None
    if file_identity is not None and not file_identity.same_chain(identity):
        raise refuse(
            data_dir,
            f"{IDENTITY_FILE} names a {file_identity.describe()} but {DATA_FILE} holds a {identity.describe()}",
            REMEDY_FOREIGN,
        )
    return Contents(identity, params, head, recorded)


def check_store(data_dir: Path) -> StoreIdentity:
    """The start-up checks on a store nobody has open (restores verify what they restored with this).
    Raises StoreRefused naming the first problem; changes nothing on disk but LMDB's lock file."""
    file_identity = check_files(data_dir)
    store = LmdbStore(data_dir, sync=False, check=check_record, checked=CHECKED_KEYS)
    try:
        return check_contents(store, file_identity).identity
    finally:
        store.close()
