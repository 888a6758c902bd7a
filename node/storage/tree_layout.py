"""Where the state tree's nodes live on disk (store format 2): with the block that stored them.

A tree node is named by the BLAKE3 of its 65-byte encoding (node/merkle/codec.py), and that is all the
tree itself knows of it. On disk it sits under `schema.tree_node_key(location, hash)` in the `nodes`
database, where `location` is the number of the block that stored it: each block's new nodes are
appended together at the end of the B-tree, instead of landing on pages all over it as hash keys do.
Written by hash, a block of 1,000 follows dirtied a page per new node, and a writer's CPU per message
grew with the tree (docs/performance.md, "Tree nodes stored with their block").

A reader must know where a node is before it reads it, so the location travels with the reference:

- an internal node's stored form is its encoding followed by its two children's locations (u64 each;
  `placed`); a leaf's stored form is its encoding. Hashes, roots and proofs are unchanged: the stored
  form's first 65 bytes are what is hashed;
- a walk learns each child's location from its parent's stored form (`learn`), so every walk from a root
  finds its way down; a root's location is the record `schema.tree_root_key(root)`, written in the
  block that made it a state root;
- a block's new nodes are placed before they are committed (`place`): a child the block created is at
  the block's own number, any other child where the update found it. A child whose location the update
  did not learn is refused (InvariantBroken) rather than stored as a reference nobody could follow.

Stores written before this layout (format 1) keep their nodes in the `tree` database, keyed by hash.
Those nodes are LEGACY: a child of a legacy internal node is legacy, and so is a root without a location
record. Nothing is migrated and nothing new is written there; a node binary of format 1 refuses a store
of format 2 by its identity record (docs/operations.md, "Upgrading").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from node.errors import InvariantBroken
from node.merkle.codec import EMPTY, PLACED_INTERNAL_LEN
from node.storage import schema
from node.storage.schema import U64_MAX

LEGACY: Final = U64_MAX  # the location of a node stored by hash alone (format 1: the `tree` database)
PLACED_LEN: Final = PLACED_INTERNAL_LEN  # an internal node's stored form: encoding, left location, right location
_INTERNAL: Final = 1  # codec.INTERNAL_TAG's byte


def placed(encoded: bytes, left_at: int, right_at: int) -> bytes:
    """An internal node's stored form."""
    return encoded + left_at.to_bytes(8, "big") + right_at.to_bytes(8, "big")


def learn(where: dict[bytes, int], stored: bytes) -> None:
    """Note where an internal node's children are, from its stored form (a legacy node's are legacy)."""
    if stored[0] != _INTERNAL:
        return
    if len(stored) == PLACED_LEN:
        where[stored[1:33]] = int.from_bytes(stored[65:73], "big")
        where[stored[33:65]] = int.from_bytes(stored[73:81], "big")
    else:
        where.setdefault(stored[1:33], LEGACY)
        where.setdefault(stored[33:65], LEGACY)


def place(new_nodes: Mapping[bytes, bytes], number: int, where: Mapping[bytes, int]) -> dict[bytes, bytes]:
    """The stored forms of the nodes block `number` creates (hash -> stored form). `where`: the locations
    the update that made them learned. InvariantBroken for a child of unknown location."""
    out: dict[bytes, bytes] = {}
    for node_hash, encoded in new_nodes.items():
        if encoded[0] != _INTERNAL:
            out[node_hash] = encoded
            continue
        left, right = encoded[1:33], encoded[33:65]
        out[node_hash] = placed(
            encoded,
            _location(left, new_nodes, number, where, node_hash),
            _location(right, new_nodes, number, where, node_hash),
        )
    return out


def root_location(root: bytes, new_nodes: Mapping[bytes, bytes], number: int, where: Mapping[bytes, int]) -> int | None:
    """Where block `number`'s state root is: this block for a root it created, where the update found an
    older node it made the root (a leaf lifted to the top); None for a root the update never reached (the
    parent's, unchanged: its record stands) or the empty tree."""
    if root in new_nodes:
        return number
    if root == EMPTY:
        return None
    return where.get(root)


def _location(
    child: bytes, new_nodes: Mapping[bytes, bytes], number: int, where: Mapping[bytes, int], parent: bytes
) -> int:
    if child in new_nodes:
        return number
    if child == EMPTY:
        return 0  # never read: no walk fetches the empty subtree
    at = where.get(child)
    if at is None:
        raise InvariantBroken(
            f"block {number}: tree node {parent.hex()[:16]} refers to {child.hex()[:16]}, whose location the "
            "update did not learn"
        )
    return at


def keyed(number: int, stored: Mapping[bytes, bytes]) -> dict[bytes, bytes]:
    """Block `number`'s stored nodes under their keys in the `nodes` database (what `LmdbStore.commit` takes)."""
    prefix = schema.tree_node_key(number, b"")
    return {prefix + node_hash: value for node_hash, value in stored.items()}


def update_writes(
    number: int, root: bytes, new_nodes: Mapping[bytes, bytes], where: Mapping[bytes, int]
) -> tuple[dict[bytes, bytes | None], dict[bytes, bytes]]:
    """What storing one tree update as block `number` writes, for `LmdbStore.commit`: the root's location
    record and the nodes under their keys. `where`: what the view the update read through learned (tools,
    benches and tests that grow a bare tree; the node commits whole blocks through `Chain`)."""
    at = root_location(root, new_nodes, number, where)
    writes: dict[bytes, bytes | None] = {} if at is None else {schema.tree_root_key(root): schema.u64(at)}
    return writes, keyed(number, place(new_nodes, number, where))


def unplaced(nodes: Mapping[bytes, bytes]) -> bytes | None:
    """The hash of an internal node given in its bare encoding (not placed), or None: what `Chain.commit`
    refuses to store, since nothing could find its children."""
    for node_hash, stored in nodes.items():
        if stored[0] == _INTERNAL and len(stored) != PLACED_LEN:
            return node_hash
    return None
