"""Reads of the state tree at a given root: value-hash lookups, path witnesses and proofs.

Reads never change the store; any root the store keeps can be queried (the node's store keeps the last
`--state-history` blocks' trees: node/storage/retention.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from node.errors import MerkleReason
from node.merkle.codec import EMPTY, HASH_LEN, PATH_BITS, Leaf, child_locations, key_path, path_int, value_hash
from node.merkle.errors import CorruptNode, ValueMismatch
from node.merkle.proof import MerkleProof
from node.merkle.store import NodeStore, fetch


class Witness(NamedTuple):
    """Where the walk along `path` ends, with every sibling on the way (EMPTY ones included)."""

    path: bytes
    siblings: tuple[bytes, ...]
    """Sibling hash at each depth 0 .. depth-1, root first."""
    leaf: Leaf | None
    """The leaf the walk ended on (of `path` or of another path), or None for an empty slot."""

    @property
    def depth(self) -> int:
        return len(self.siblings)

    @property
    def value_hash(self) -> bytes | None:
        """The value hash stored under `path`, or None when the path is absent."""
        leaf = self.leaf
        return leaf.value_hash if leaf is not None and leaf.path == self.path else None


def witness(store: NodeStore, root: bytes, path: bytes) -> Witness:
    """Walk from `root` along `path` until a leaf or an empty slot (each child read where its parent says)."""
    siblings: list[bytes] = []
    bits = path_int(path)  # the bit at depth d is (bits >> (PATH_BITS - 1 - d)) & 1, as codec.path_bit says
    node = root
    at: bytes | None = None  # the root: the store finds it
    depth = 0
    while node != EMPTY:
        loaded, stored = fetch(store, node, at)
        if isinstance(loaded, Leaf):
            return Witness(path, tuple(siblings), loaded)
        if depth >= PATH_BITS:
            raise CorruptNode(node, MerkleReason.INTERNAL_TOO_DEEP, str(depth))
        left, right = loaded
        left_at, right_at = child_locations(stored)
        if (bits >> (PATH_BITS - 1 - depth)) & 1:
            node, at = right, right_at
            siblings.append(left)
        else:
            node, at = left, left_at
            siblings.append(right)
        depth += 1
    return Witness(path, tuple(siblings), None)


def get_hashed(store: NodeStore, root: bytes, path: bytes) -> bytes | None:
    """The value hash stored under `path`, or None."""
    bits = path_int(path)
    node = root
    at: bytes | None = None
    depth = 0
    while node != EMPTY:
        loaded, stored = fetch(store, node, at)
        if isinstance(loaded, Leaf):
            return loaded.value_hash if loaded.path == path else None
        if depth >= PATH_BITS:
            raise CorruptNode(node, MerkleReason.INTERNAL_TOO_DEEP, str(depth))
        left_at, right_at = child_locations(stored)
        if (bits >> (PATH_BITS - 1 - depth)) & 1:
            node, at = loaded.right, right_at
        else:
            node, at = loaded.left, left_at
        depth += 1
    return None


def get(store: NodeStore, root: bytes, key: bytes) -> bytes | None:
    """The value hash of `key` (values live outside the tree), or None when the key is absent."""
    return get_hashed(store, root, key_path(key))


def prove(store: NodeStore, root: bytes, key: bytes, value_lookup: Callable[[bytes], bytes | None]) -> MerkleProof:
    """Inclusion proof of `key` when present, else exclusion proof.

    Values are not in the tree, so `value_lookup(key)` fetches the value from wherever the caller keeps
    them; it is called only when the key is present.
    """
    found = witness(store, root, key_path(key))
    value = value_lookup(key) if found.value_hash is not None else None
    return proof_from_witness(key, found, value)


def proof_from_witness(key: bytes, found: Witness, value: bytes | None) -> MerkleProof:
    """The proof for `key` from a walk along its path; `value` is used only when the key is present.

    Raises `ValueMismatch` when the key is present and `value` is missing or does not hash to the tree's
    value hash (the caller's value store disagrees with the tree).
    """
    leaf = found.leaf
    other_path: bytes | None = None
    other_value_hash: bytes | None = None
    if leaf is not None and leaf.path == found.path:
        got = None if value is None else value_hash(value)
        if got != leaf.value_hash:
            raise ValueMismatch(key, leaf.value_hash, got)
    else:
        value = None
        if leaf is not None:
            other_path, other_value_hash = leaf.path, leaf.value_hash
    return MerkleProof(
        key=key,
        value=value,
        siblings=tuple(s for s in reversed(found.siblings) if s != EMPTY),
        bitmap=_bitmap(found.siblings),
        depth=found.depth,
        other_path=other_path,
        other_value_hash=other_value_hash,
    )


def _bitmap(siblings: tuple[bytes, ...]) -> bytes:
    bits = 0
    for depth, sibling in enumerate(siblings):
        if sibling != EMPTY:
            bits |= 1 << (PATH_BITS - 1 - depth)
    return bits.to_bytes(HASH_LEN, "big")
