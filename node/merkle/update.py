"""Writes to the state tree: one batched, pure update per block, and the bulk build of a fresh tree.

`update` reads old nodes through a `NodeStore` and returns the root plus the nodes it created; the caller
writes those in the block's own transaction. Nothing is overwritten or deleted here: an update with `here` also says
which stored nodes it replaced (`Placed.stale`), and the store collects those once no retained root reaches
them (node/storage/retention.py).

The batch descends once: the changed paths are sorted, and each node on the way down takes the contiguous
run of changes under it, so a node shared by many changed keys is loaded, hashed and emitted once.

With `here` (the node's store: the block's number, node/storage/tree_layout.py), the update also says where
things are: each node it loads comes with its children's locations (its parent's stored form), and each new
internal node is emitted in its stored form, its encoding followed by its children's locations (`here` for
a child made now, an old child's own); the result is then `Placed`, with the new root's location. Names and
roots are the same with or without it.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol, cast

from blake3 import blake3

from node.errors import InvariantBroken, MerkleReason
from node.merkle.build import build_placed, build_sorted
from node.merkle.codec import (
    EMPTY,
    HASH_LEN,
    INTERNAL_TAG,
    NODE_LEN,
    NOWHERE,
    PATH_BITS,
    PLACED_INTERNAL_LEN,
    UNPLACED,
    Leaf,
    key_path,
    path_int,
    value_hash,
)
from node.merkle.errors import CorruptNode, InvalidChange, MissingNode
from node.merkle.store import NodeStore, load_node

STALE_NODE = 0x01  # a stale entry's flags: the node itself is no longer reachable from the new root
STALE_ROOT = 0x02  # the entry's hash was the parent root: its location record may go with it


class Placed(dict[bytes, bytes]):
    """New nodes in their stored forms (hash -> stored form), as an update with `here` made them: what the
    node's store commits (`BlockNodes.here` refuses any other mapping). `stale`: the placed nodes the update
    replaced, each (location, hash, flags): reachable from the parent root, not from the new one (the store
    indexes them under the block that made them stale and collects them once no retained root needs them:
    node/storage/retention.py)."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        self.stale: list[tuple[bytes, bytes, int]] = []


@dataclass(frozen=True)
class UpdateResult:
    root: bytes
    new_nodes: dict[bytes, bytes]
    """hash -> encoded node (stored form with `here`: `Placed`), for every node the new root reaches that the
    update had to create."""
    root_at: bytes | None = None
    """With `here`: where the new root is (`here` when new, an old node's location when one was lifted to the
    top); None when the root did not change, or is EMPTY."""


@dataclass(frozen=True)
class BlockNodes:
    """The tree nodes block `block`'s update made, to the state root `root` (`count` of them): `placed`, in
    their stored forms, when the update ran in this process; None when the process that ran it (the store's
    writer, node/storage/writer.py) holds them until it commits that block."""

    block: int
    root: bytes
    count: int
    placed: Placed | None = None

    def __len__(self) -> int:
        return self.count

    def here(self) -> Placed:
        """The nodes, for a commit in this process: InvariantBroken when another process holds them, or when
        they did not come out of a placed update (nothing could find the children of a node stored bare)."""
        if self.placed is None:
            raise InvariantBroken(f"block {self.block}: its tree nodes are held by no writer of this chain")
        if not isinstance(self.placed, Placed):  # a mapping forged around the update
            raise InvariantBroken(f"block {self.block}: its tree nodes were not placed (an update without `here`)")
        return self.placed


@dataclass(frozen=True)
class TreeUpdate:
    """What a `TreeUpdater` answers: the new root, the block's nodes, and where the new root is (as
    `UpdateResult.root_at`)."""

    root: bytes
    nodes: BlockNodes
    root_at: bytes | None = None


class TreeUpdater(Protocol):
    """The one way the state transition updates the tree: block `here`'s changes onto `root` (at `root_at`),
    placed. Where it runs is the implementation's: `InProcessUpdater` here, the store's writer process over
    its own store (node/storage/writer.py); `Chain` decides which it hands the transition."""

    def update_tree(
        self, root: bytes, changes: Mapping[bytes, bytes | None], *, here: bytes, root_at: bytes
    ) -> TreeUpdate: ...


class InProcessUpdater:
    """A `TreeUpdater` that runs `update` in this process, reading old nodes through `store`: its nodes come
    back placed, for the caller to commit."""

    __slots__ = ("store",)

    def __init__(self, store: NodeStore) -> None:
        self.store = store

    def update_tree(
        self, root: bytes, changes: Mapping[bytes, bytes | None], *, here: bytes, root_at: bytes
    ) -> TreeUpdate:
        result = update(self.store, root, changes, here=here, root_at=root_at)
        placed = cast(Placed, result.new_nodes)  # `update` with `here` makes them `Placed`
        nodes = BlockNodes(int.from_bytes(here, "big"), result.root, len(placed), placed)
        return TreeUpdate(result.root, nodes, result.root_at)


def update(
    store: NodeStore,
    root: bytes,
    changes: Mapping[bytes, bytes | None],
    *,
    here: bytes | None = None,
    root_at: bytes | None = None,
) -> UpdateResult:
    """Apply key -> value changes (None deletes) to the tree at `root` (`root_at`: where it is; required with
    `here`)."""
    return update_hashed(
        store,
        root,
        {key_path(key): None if value is None else value_hash(value) for key, value in changes.items()},
        here=here,
        root_at=root_at,
    )


def update_hashed(
    store: NodeStore,
    root: bytes,
    changes: Mapping[bytes, bytes | None],
    *,
    here: bytes | None = None,
    root_at: bytes | None = None,
) -> UpdateResult:
    """Apply path -> value_hash changes (None deletes) to the tree at `root`."""
    if here is not None and root_at is None and root != EMPTY:
        raise ValueError("an update that places its nodes needs the root's location (root_at)")
    for path, vhash in changes.items():
        if len(path) != HASH_LEN:
            raise InvalidChange(MerkleReason.PATH_LENGTH, path)
        if vhash is not None and len(vhash) != HASH_LEN:
            raise InvalidChange(MerkleReason.VALUE_HASH_LENGTH, path)
    if not changes:
        return UpdateResult(root, Placed() if here is not None else {})
    paths = sorted(changes)
    batch = _Batch(store, paths, [changes[p] for p in paths], here)
    new_root, _is_leaf, new_at = batch.apply(root, root_at, 0, 0, len(paths))
    moved = new_root not in (root, EMPTY) and here is not None
    if here is not None and root not in (new_root, EMPTY) and root_at not in (None, UNPLACED):
        batch.root_replaced(root, root_at)
    return UpdateResult(new_root, batch.out, new_at if moved else None)


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
    """One batch of sorted changes walking down one tree; `out` collects the nodes it creates. Each subtree
    it returns comes as (hash, is a leaf (None: not known), where it is)."""

    def __init__(self, store: NodeStore, paths: list[bytes], vhashes: list[bytes | None], here: bytes | None) -> None:
        self.store = store
        self.get = store.get
        self.paths = paths
        self.ints = [path_int(p) for p in paths]
        self.vhashes = vhashes
        self.here = here
        self.made = here if here is not None else UNPLACED  # where a node made now is
        self.out: dict[bytes, bytes] = Placed() if here is not None else {}
        # the placed nodes this update replaces (location, hash, flags): Placed.stale; none without `here`
        self.stale: list[tuple[bytes, bytes, int]] | None = self.out.stale if isinstance(self.out, Placed) else None

    def replaced(self, node: bytes, at: bytes | None) -> None:
        """`node`, stored at `at`, is not part of the new tree (nodes stored bare, by hash, are never collected:
        a format-1 store's hash keys may be shared by a node made again)."""
        if self.stale is not None and at is not None and at != UNPLACED:
            self.stale.append((at, node, STALE_NODE))

    def root_replaced(self, root: bytes, root_at: bytes) -> None:
        """The parent root is no longer the root: when its node is replaced too, flag that node's entry, so the
        root's location record goes with it. (A root whose node stays in the new tree, a lone leaf kept below
        it, keeps its record: that node may be the root again at the same location, and a record is only ever
        collected with its node, which no later tree can name again.)"""
        assert self.stale is not None
        if self.stale and self.stale[-1][:2] == (root_at, root):  # the walk replaces the root last
            self.stale[-1] = (root_at, root, STALE_NODE | STALE_ROOT)

    def apply(self, node: bytes, at: bytes | None, depth: int, lo: int, hi: int) -> tuple[bytes, bool | None, bytes]:
        """New (hash, is_leaf, location) of the subtree at `depth` after changes[lo:hi], which all lie under it;
        `at`: where `node` is (None: a root). (`fetch`, `codec.decode` and `child_locations` are inlined: this
        runs once per node on every changed path, the bulk of a block's tree update.)"""
        if lo == hi:
            raise AssertionError("apply() needs at least one change")
        if node == EMPTY:
            return self._build(depth, lo, hi, None)
        stored = self.get(node, at)
        if stored is None:
            raise MissingNode(node)
        size = len(stored)
        tag = stored[0] if size else -1
        if tag == 0 and size == NODE_LEN:
            return self._merge_leaf(node, at, Leaf(stored[1:33], stored[33:65]), depth, lo, hi)
        if tag != 1 or size not in (NODE_LEN, PLACED_INTERNAL_LEN):
            raise CorruptNode(node, MerkleReason.BAD_ENCODING)
        if depth >= PATH_BITS:
            raise CorruptNode(node, MerkleReason.INTERNAL_TOO_DEEP, str(depth))
        left, right = stored[1:33], stored[33:65]
        left_at, right_at = (stored[65:73], stored[73:81]) if size == PLACED_INTERNAL_LEN else (UNPLACED, UNPLACED)
        ints = self.ints
        shift = PATH_BITS - depth
        threshold = ((ints[lo] >> shift) << shift) | (1 << (shift - 1))
        split = bisect_left(ints, threshold, lo, hi)
        if split > lo:
            new_left, left_leaf, new_left_at = self.apply(left, left_at, depth + 1, lo, split)
        else:
            new_left, left_leaf, new_left_at = left, None, left_at
        if split < hi:
            new_right, right_leaf, new_right_at = self.apply(right, right_at, depth + 1, split, hi)
        else:
            new_right, right_leaf, new_right_at = right, None, right_at
        if new_left == left and new_right == right:
            return node, False, at if at is not None else UNPLACED
        if self.stale is not None:
            self.replaced(node, at)  # an internal node is never lifted: a new hash means it is gone
        if EMPTY in (new_left, new_right):
            other, other_leaf, other_at = (
                (new_right, right_leaf, new_right_at) if new_left == EMPTY else (new_left, left_leaf, new_left_at)
            )
            if other == EMPTY:
                return EMPTY, False, NOWHERE
            if other_leaf is None:
                other_leaf = isinstance(load_node(self.store, other, other_at), Leaf)
            if other_leaf:
                return other, True, other_at  # a lone leaf is lifted
        encoded = INTERNAL_TAG + new_left + new_right
        new = blake3(encoded).digest()
        self.out[new] = encoded if self.here is None else encoded + new_left_at + new_right_at
        return new, False, self.made

    def _merge_leaf(
        self, node: bytes, at: bytes | None, leaf: Leaf, depth: int, lo: int, hi: int
    ) -> tuple[bytes, bool | None, bytes]:
        """Changes landing on a lifted leaf: rebuild the subtree from the leaf plus the changes."""
        found = bisect_left(self.ints, path_int(leaf.path), lo, hi)
        if found < hi and self.paths[found] == leaf.path:
            vhash = self.vhashes[found]
            if vhash is None or vhash != leaf.value_hash:
                self.replaced(node, at)
                return self._build(depth, lo, hi, None)  # the old leaf is replaced or deleted
        return self._build(depth, lo, hi, (leaf.path, node, at if at is not None else UNPLACED))

    def _build(
        self, depth: int, lo: int, hi: int, kept: tuple[bytes, bytes, bytes] | None
    ) -> tuple[bytes, bool | None, bytes]:
        """Subtree of the sets in changes[lo:hi] plus the unchanged `kept` leaf (path, hash, location), if any."""
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
                return kept[1], True, kept[2]  # only the unchanged leaf is left: nothing changed here
            kept_int = path_int(kept[0])
            at = bisect_left(ints, kept_int)
            ints.insert(at, kept_int)
            paths.insert(at, kept[0])
            vhashes.insert(at, EMPTY)  # never read: build_placed reuses the kept leaf's hash
        root, root_at = build_placed(
            ints,
            paths,
            vhashes,
            depth,
            out=self.out,
            reuse=(kept[0], kept[1]) if kept is not None else None,
            reuse_at=kept[2] if kept is not None else UNPLACED,
            here=self.here,
        )
        return root, len(ints) == 1, root_at
