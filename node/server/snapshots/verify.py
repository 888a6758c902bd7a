"""Checking a restored store before it is put in place: its head block and its state tree.

The store is opened read-only and without LMDB's lock file, so checking never changes a byte of it. The
head must be the expected block (number, header hash, state root), and every tree node reachable from the
state root must be present and hash to the reference its parent holds (the tree is content addressed, so
this proves the state committed to by the header is all there); the tree's leaves must number exactly the
public state entries of the store.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import lmdb
from blake3 import blake3

from chain.v1 import block_pb2
from node.block import header_hash
from node.errors import RestoreFailed
from node.merkle import EMPTY
from node.merkle.codec import INTERNAL_TAG, LEAF_TAG, NODE_LEN, PLACED_INTERNAL_LEN, child_locations
from node.state.access import StateAccess
from node.storage.kv import Overlay
from node.storage.lmdb_store import LmdbNodeView, LmdbReadView
from node.storage.schema import TREE_PREFIX_LIMIT

LEAF, INTERNAL = LEAF_TAG[0], INTERNAL_TAG[0]


@dataclass(frozen=True)
class Expected:
    block_number: int
    block_hash: bytes | None  # None: a snapshot from before header hashes were recorded (number and root only)
    state_root: bytes


def _public_entries(view: LmdbReadView) -> int:
    """Entries committed to the tree: every key whose prefix byte is below TREE_PREFIX_LIMIT."""
    return sum(1 for prefix in range(TREE_PREFIX_LIMIT) for _ in view.scan(bytes([prefix])))


def walk_tree(nodes: LmdbNodeView, root: bytes) -> int:
    """Leaves under `root`, checking that every node is present and hashes to its reference.

    The node layout (node/merkle/codec.py: a tag byte, then a leaf's path and value hash or an internal
    node's two child hashes, an internal node stored with its children's locations after them) is read
    inline: this loop runs once per tree node, millions of times."""
    if root == EMPTY:
        return 0
    leaves = 0
    stack: list[tuple[bytes, bytes | None]] = [(root, None)]  # (reference, where its parent says it is)
    get, push = nodes.get, stack.append
    while stack:
        ref, at = stack.pop()
        raw = get(ref, at)
        if raw is None:
            raise RestoreFailed(f"state tree node {ref.hex()} is missing")
        size = len(raw)
        if (size != NODE_LEN and (size != PLACED_INTERNAL_LEN or raw[0] != INTERNAL)) or blake3(
            raw[:NODE_LEN]
        ).digest() != ref:
            raise RestoreFailed(f"state tree node {ref.hex()} does not hash to its reference")
        if raw[0] == LEAF:
            leaves += 1
        elif raw[0] == INTERNAL:
            left_at, right_at = child_locations(raw)
            if raw[1:33] != EMPTY:
                push((raw[1:33], left_at))
            if raw[33:65] != EMPTY:
                push((raw[33:65], right_at))
        else:
            raise RestoreFailed(f"state tree node {ref.hex()} is not a tree node")
    return leaves


def verify_store(directory: Path, expected: Expected) -> block_pb2.Block:
    """The store's head block once everything checks out; RestoreFailed saying what does not."""
    env = lmdb.open(str(directory), readonly=True, lock=False, max_dbs=4, readahead=False)
    try:
        state, tree, placed = (_named(env, name) for name in (b"state", b"tree", b"nodes"))
        with env.begin() as txn:  # bytes, as the store views expect
            view, nodes = LmdbReadView(txn, state), LmdbNodeView(txn, placed, legacy=tree, state=state)
            head = StateAccess(Overlay(view)).head()
            if head is None:
                raise RestoreFailed(f"the restored store in {directory} has no head block")
            _check_head(head, expected)
            leaves = walk_tree(nodes, bytes(head.header.state_root))
            public = _public_entries(view)
    except lmdb.Error as exc:
        raise RestoreFailed(f"the restored store in {directory} cannot be read: {exc}") from exc
    finally:
        env.close()
    if leaves != public:
        raise RestoreFailed(f"the restored state tree has {leaves} leaves but the store {public} public entries")
    return head


def _named(env: lmdb.Environment, name: bytes) -> Any:
    """A named database of the restored store; None when it has none (`nodes` before format 2, `tree` in a
    store made by format 2)."""
    try:
        return env.open_db(name, create=False)
    except lmdb.NotFoundError:
        if name == b"state":
            raise
        return None


def _check_head(head: block_pb2.Block, expected: Expected) -> None:
    number = int(head.header.number)
    if number != expected.block_number:
        raise RestoreFailed(f"the restored store is at block {number}, expected {expected.block_number}")
    if header_hash(head.header) != bytes(head.hash):
        raise RestoreFailed(f"the restored head block {number} does not hash to its recorded hash")
    if expected.block_hash is not None and bytes(head.hash) != expected.block_hash:
        raise RestoreFailed(f"the restored head block {number} does not have the expected header hash")
    if bytes(head.header.state_root) != expected.state_root:
        raise RestoreFailed(f"the restored head block {number} does not have the expected state root")


def store_height(directory: Path) -> int | None:
    """The head block number of the store in `directory`, read without writing to it (None: no head)."""
    env = lmdb.open(str(directory), readonly=True, lock=False, max_dbs=4, readahead=False)
    try:
        state = env.open_db(b"state", create=False)
        with env.begin() as txn:  # bytes, as the store views expect
            head = StateAccess(Overlay(LmdbReadView(txn, state))).head()
    finally:
        env.close()
    return None if head is None else int(head.header.number)
