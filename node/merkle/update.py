"""Writes to the state tree: one batched, pure update per block, and the bulk build of a fresh tree.

`update` reads old nodes through a `NodeStore` and returns the root plus the nodes it created; the caller
writes those in the block's own transaction. Nothing is overwritten or deleted, so old roots stay readable
(there is no garbage collection yet).

The batch descends once: the changed paths are sorted, and each node on the way down takes the contiguous
run of changes under it, so a node shared by many changed keys is loaded, hashed and emitted once.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Mapping
from dataclasses import dataclass

from node.errors import MerkleReason
from node.merkle.build import build_sorted
from node.merkle.codec import (
    EMPTY,
    HASH_LEN,
    PATH_BITS,
    Leaf,
    encode_internal,
    key_path,
    node_hash,
    path_int,
    value_hash,
)
from node.merkle.errors import CorruptNode, InvalidChange
from node.merkle.store import NodeStore, load_node


@dataclass(frozen=True)
class UpdateResult:
    root: bytes
    new_nodes: dict[bytes, bytes]
    """hash -> encoded node, for every node the new root reaches that the update had to create."""


def update(store: NodeStore, root: bytes, changes: Mapping[bytes, bytes | None]) -> UpdateResult:
    """Apply key -> value changes (None deletes) to the tree at `root`."""
    return update_hashed(
        store,
        root,
        {key_path(key): None if value is None else value_hash(value) for key, value in changes.items()},
    )


def update_hashed(store: NodeStore, root: bytes, changes: Mapping[bytes, bytes | None]) -> UpdateResult:
    """Apply path -> value_hash changes (None deletes) to the tree at `root`."""
    for path, vhash in changes.items():
        if len(path) != HASH_LEN:
            raise InvalidChange(MerkleReason.PATH_LENGTH, path)
        if vhash is not None and len(vhash) != HASH_LEN:
            raise InvalidChange(MerkleReason.VALUE_HASH_LENGTH, path)
    if not changes:
        return UpdateResult(root, {})
    paths = sorted(changes)
    batch = _Batch(store, paths, [changes[p] for p in paths])
    new_root, _is_leaf = batch.apply(root, 0, 0, len(paths))
    return UpdateResult(new_root, batch.out)


def build_tree(items: Mapping[bytes, bytes]) -> UpdateResult:
    """Build a tree from scratch from key -> value, in O(n) hashes (equal to `update` on an empty tree)."""
    return build_tree_hashed({key_path(key): value_hash(value) for key, value in items.items()})


def build_tree_hashed(items: Mapping[bytes, bytes]) -> UpdateResult:
    """Build a tree from scratch from path -> value_hash."""
    paths = sorted(items)
    for path in paths:
        if len(path) != HASH_LEN or len(items[path]) != HASH_LEN:
            raise InvalidChange(MerkleReason.CHANGE_LENGTH, path)
    out: dict[bytes, bytes] = {}
    root = build_sorted([path_int(p) for p in paths], paths, [items[p] for p in paths], 0, out=out)
    return UpdateResult(root, out)


class _Batch:
    """One batch of sorted changes walking down one tree; `out` collects the nodes it creates."""

    def __init__(self, store: NodeStore, paths: list[bytes], vhashes: list[bytes | None]) -> None:
        self.store = store
        self.paths = paths
        self.ints = [path_int(p) for p in paths]
        self.vhashes = vhashes
        self.out: dict[bytes, bytes] = {}

    def apply(self, node: bytes, depth: int, lo: int, hi: int) -> tuple[bytes, bool]:
        """New (hash, is_leaf) of the subtree at `depth` after changes[lo:hi], which all lie under it."""
        if lo == hi:
            raise AssertionError("apply() needs at least one change")
        if node == EMPTY:
            return self._build(depth, lo, hi, None)
        loaded = load_node(self.store, node)
        if isinstance(loaded, Leaf):
            return self._merge_leaf(node, loaded, depth, lo, hi)
        if depth >= PATH_BITS:
            raise CorruptNode(node, MerkleReason.INTERNAL_TOO_DEEP, str(depth))
        left, right = loaded
        shift = PATH_BITS - depth
        threshold = ((self.ints[lo] >> shift) << shift) | (1 << (shift - 1))
        split = bisect_left(self.ints, threshold, lo, hi)
        new_left, left_leaf = self.apply(left, depth + 1, lo, split) if split > lo else (left, None)
        new_right, right_leaf = self.apply(right, depth + 1, split, hi) if split < hi else (right, None)
        if new_left == left and new_right == right:
            return node, False
        if EMPTY in (new_left, new_right):
            other, other_leaf = (new_right, right_leaf) if new_left == EMPTY else (new_left, left_leaf)
            if other == EMPTY:
                return EMPTY, False
            if other_leaf is None:
                other_leaf = isinstance(load_node(self.store, other), Leaf)
            if other_leaf:
                return other, True  # a lone leaf is lifted
        encoded = encode_internal(new_left, new_right)
        new = node_hash(encoded)
        self.out[new] = encoded
        return new, False

    def _merge_leaf(self, node: bytes, leaf: Leaf, depth: int, lo: int, hi: int) -> tuple[bytes, bool]:
        """Changes landing on a lifted leaf: rebuild the subtree from the leaf plus the changes."""
        at = bisect_left(self.ints, path_int(leaf.path), lo, hi)
        if at < hi and self.paths[at] == leaf.path:
            vhash = self.vhashes[at]
            if vhash is None or vhash != leaf.value_hash:
                return self._build(depth, lo, hi, None)  # the old leaf is replaced or deleted
        return self._build(depth, lo, hi, (leaf.path, node))

    def _build(self, depth: int, lo: int, hi: int, kept: tuple[bytes, bytes] | None) -> tuple[bytes, bool]:
        """Subtree of the sets in changes[lo:hi] plus the unchanged `kept` leaf (path, hash), if any."""
        kept_path = kept[0] if kept is not None else None
        ints: list[int] = []
        paths: list[bytes] = []
        vhashes: list[bytes] = []
        for i in range(lo, hi):
            vhash = self.vhashes[i]
            if vhash is not None and self.paths[i] != kept_path:
                ints.append(self.ints[i])
                paths.append(self.paths[i])
                vhashes.append(vhash)
        if kept is not None:
            if not ints:
                return kept[1], True  # only the unchanged leaf is left: nothing changed here
            kept_int = path_int(kept[0])
            at = bisect_left(ints, kept_int)
            ints.insert(at, kept_int)
            paths.insert(at, kept[0])
            vhashes.insert(at, EMPTY)  # never read: build_sorted reuses the kept leaf's hash
        root = build_sorted(ints, paths, vhashes, depth, out=self.out, reuse=kept)
        return root, len(ints) == 1
