"""Test helpers: an obviously-correct reference model of the tree, a shape checker, and strategies."""

from __future__ import annotations

from collections.abc import Mapping

from hypothesis import strategies as st

from node.merkle.codec import (
    EMPTY,
    PATH_BITS,
    Internal,
    Leaf,
    encode_internal,
    encode_leaf,
    key_path,
    node_hash,
    path_bit,
    value_hash,
)
from node.merkle.store import NodeStore, load_node


def reference_root(leaves: Mapping[bytes, bytes], depth: int = 0) -> bytes:
    """Root of the set of (path, value_hash), straight from the definition.

    No leaves: EMPTY. One leaf: the leaf itself, wherever it is (lifted). Two or more: an internal node over
    the two halves split on bit `depth`.
    """
    if not leaves:
        return EMPTY
    if len(leaves) == 1:
        ((path, vhash),) = leaves.items()
        return node_hash(encode_leaf(path, vhash))
    left = {p: v for p, v in leaves.items() if path_bit(p, depth) == 0}
    right = {p: v for p, v in leaves.items() if path_bit(p, depth) == 1}
    return node_hash(encode_internal(reference_root(left, depth + 1), reference_root(right, depth + 1)))


def hashed(items: Mapping[bytes, bytes]) -> dict[bytes, bytes]:
    """key -> value as path -> value_hash."""
    return {key_path(k): value_hash(v) for k, v in items.items()}


def reachable(store: NodeStore, root: bytes) -> set[bytes]:
    """Hashes of every node reachable from `root`."""
    seen: set[bytes] = set()
    todo = [root]
    while todo:
        node = todo.pop()
        if node == EMPTY or node in seen:
            continue
        seen.add(node)
        loaded = load_node(store, node)
        if isinstance(loaded, Internal):
            todo.extend(loaded)
    return seen


def check_shape(store: NodeStore, root: bytes) -> dict[bytes, bytes]:
    """Assert the compressed shape below `root`; returns its leaves as path -> value_hash."""
    leaves: dict[bytes, bytes] = {}

    def walk(node: bytes, depth: int, prefix: bytes) -> str:
        if node == EMPTY:
            return "empty"
        loaded = load_node(store, node)
        if isinstance(loaded, Leaf):
            for d in range(depth):
                assert path_bit(loaded.path, d) == path_bit(prefix, d), "leaf off its path"
            leaves[loaded.path] = loaded.value_hash
            return "leaf"
        assert depth < PATH_BITS
        left = walk(loaded.left, depth + 1, prefix)
        right = walk(loaded.right, depth + 1, _with_bit(prefix, depth))
        kinds = {left, right}
        assert kinds != {"empty"}, "internal node with two empty children"
        assert kinds != {"empty", "leaf"}, "lone leaf not lifted"
        return "internal"

    walk(root, 0, bytes(32))
    return leaves


def _with_bit(path: bytes, depth: int) -> bytes:
    value = int.from_bytes(path, "big") | (1 << (PATH_BITS - 1 - depth))
    return value.to_bytes(32, "big")


keys = st.binary(min_size=0, max_size=6)
values = st.binary(min_size=0, max_size=8)
key_values = st.dictionaries(keys, values, max_size=40)

_FLIP_POSITIONS = (0, 1, 7, 8, 100, 101, 200, 254, 255)


@st.composite
def clustered_paths(draw: st.DrawFn) -> bytes:
    """Paths that differ from one base only at a few fixed bits: long shared prefixes, chains, depth 256."""
    base = int.from_bytes(bytes(range(32)), "big")
    flips = draw(st.sets(st.sampled_from(_FLIP_POSITIONS)))
    for position in flips:
        base ^= 1 << (PATH_BITS - 1 - position)
    return base.to_bytes(32, "big")


clustered_leaves = st.dictionaries(clustered_paths(), values.map(value_hash), max_size=40)
