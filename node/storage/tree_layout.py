"""Where the state tree's nodes live on disk (store format 2): with the block that stored them.

A tree node is named by the BLAKE3 of its 65-byte encoding (node/merkle/codec.py), and that is all the
tree itself knows of it. On disk it sits under `schema.tree_node_key(location, hash)` in the `nodes`
database, where `location` is the number of the block that stored it (its u64): each block's new nodes are
appended together at the end of the B-tree, instead of landing on pages all over it as hash keys do.
Written by hash, a block of 1,000 follows dirties about a page per new node, and a writer's CPU and bytes
per message grow with the tree (docs/performance.md, "As the store grows").

A reader must know where a node is before it reads it, so the location travels with the reference:

- an internal node's stored form is its encoding followed by its two children's locations (8 bytes each);
  a leaf's stored form is its encoding. Names, roots and proofs are unchanged: a node's first 65 bytes are
  what is hashed (`codec.decode` and `codec.child_locations` read both forms);
- a walk carries each child's location down from its parent (`NodeStore.get(hash, at)`: merkle/query.py,
  merkle/update.py, the restore's walk); a walk's root is found by the record `schema.tree_root_key(root)`,
  written by the block that made it a state root (node/state/transition.py `finish_block`);
- an update given `here` (the block's number) emits each new internal node in its stored form as it makes
  it: a child made now is `here`, an old child where its parent said. Its result is `Placed`;
  `Chain.commit` stores nothing else, so no node is ever stored without its children's locations.

Stores written before this layout (format 1) keep their nodes in the `tree` database, keyed by hash. Those
nodes are LEGACY: a bare internal node's children are legacy (`codec.UNPLACED`), and so is a root without a
location record. Nothing is migrated and nothing new is written there; a node binary of format 1 refuses a
store of format 2 by its identity record (docs/operations.md, "Upgrade").
"""

from __future__ import annotations

from typing import Final

from node.merkle.codec import UNPLACED
from node.merkle.update import UpdateResult
from node.storage import schema

LEGACY: Final = UNPLACED  # the location of a node stored by hash alone (format 1: the `tree` database)


def root_record(result: UpdateResult) -> dict[bytes, bytes]:
    """The location record of an update's new root (none when the root did not move)."""
    return {} if result.root_at is None else {schema.tree_root_key(result.root): result.root_at}
