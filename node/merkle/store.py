"""Content-addressed node stores: a node's bytes are kept under its hash, and nothing is ever overwritten.

Nothing here deletes a node: the node's LMDB store collects the nodes no retained root reaches
(node/storage/retention.py), by the list each placed update hands back (`Placed.stale`).

The LMDB backend is node.merkle.lmdb_store, imported by the node only: proof verification and in-memory
trees never load LMDB.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from itertools import islice
from typing import Protocol

from node.errors import MerkleReason
from node.merkle.codec import Node, decode
from node.merkle.errors import CorruptNode, MissingNode


class NodeStore(Protocol):
    def get(self, node_hash: bytes, at: bytes | None = None) -> bytes | None:
        """The node stored under `node_hash` (its encoding, or its stored form: an internal node may be
        followed by its children's locations, codec.child_locations), or None. `at`: where the node is, as
        its parent's stored form says (None: a walk's root, or unknown); a store without locations ignores it."""
        ...


class DictNodeStore:
    """In-memory store for tests and tools."""

    def __init__(self, nodes: Mapping[bytes, bytes] | None = None) -> None:
        self._nodes: dict[bytes, bytes] = dict(nodes) if nodes else {}

    def get(self, node_hash: bytes, at: bytes | None = None) -> bytes | None:
        return self._nodes.get(node_hash)

    def put_nodes(self, nodes: Mapping[bytes, bytes]) -> None:
        self._nodes.update(nodes)

    def __len__(self) -> int:
        return len(self._nodes)


class RecentNodes:
    """The nodes the latest updates created (hash -> encoding), up to `capacity`, the oldest leaving first.

    An update reads the nodes on the path of every changed key, and the previous blocks created the top of
    every such path: keeping what they created saves a store read (and its hash check) for each. Only
    nodes an update computed go in, so each sits under the hash of its own bytes: nodes are content
    addressed, so a hit is the stored node whatever store or snapshot it is read through. One writer adds
    (the committer, after the block's transaction); any thread may read.
    """

    def __init__(self, capacity: int) -> None:  # about 220 bytes a node (tracemalloc)
        self.capacity = capacity
        self._nodes: dict[bytes, bytes] = {}

    def add(self, nodes: Mapping[bytes, bytes]) -> None:
        self._nodes.update(nodes)
        excess = len(self._nodes) - self.capacity
        if excess > 0:
            _drop_oldest(self._nodes, excess)

    def over(self, store: NodeStore) -> CachedNodeStore:
        """`store`, with these nodes answered from memory."""
        return CachedNodeStore(self._nodes, store)

    def __len__(self) -> int:
        return len(self._nodes)


def _drop_oldest(nodes: dict[bytes, bytes], count: int) -> None:
    """Drop the `count` oldest entries of an insertion-ordered memo."""
    for old in list(islice(nodes, count)):  # listed in one C call: no other thread runs in between
        nodes.pop(old, None)  # another thread may have dropped it already


class CachedNodeStore:
    """A node store read through a memo first (`RecentNodes`, `ReadNodes`); with `keep`, what a miss reads
    from the store is handed to it. The memo holds nodes as the store gave them (stored forms), so a walk
    finds each child's location in its parent either way."""

    __slots__ = ("_keep", "_recent", "_store")

    def __init__(
        self, recent: Mapping[bytes, bytes], store: NodeStore, keep: Callable[[bytes, bytes], None] | None = None
    ) -> None:
        self._recent = recent
        self._store = store
        self._keep = keep

    def get(self, node_hash: bytes, at: bytes | None = None) -> bytes | None:
        hit = self._recent.get(node_hash)
        if hit is not None:
            return hit
        data = self._store.get(node_hash, at)
        if data is not None and self._keep is not None:
            self._keep(node_hash, data)
        return data


class ReadNodes:
    """Tree nodes that reads fetched from a store which checks each node against its hash (the LMDB node
    view), hash -> encoding, up to `capacity`; when full, the oldest eighth leaves.

    Every proof walks from the head's root down to a leaf, so the walks under one head share their top, and
    the nodes below the paths a block changes stay the same from head to head. Nodes are content addressed:
    a node kept here is the stored node under its hash whatever root or snapshot a later walk starts from,
    so there is nothing to invalidate when blocks commit, and nothing here is an answer (each read still
    takes the head, the records and the values from its own transaction). Only what the store handed back
    after its own check goes in; a node the store refuses raises and is never kept. A hit skips the LMDB
    lookup and the hash of the node. Any thread may read and add.
    """

    def __init__(self, capacity: int = 32_768) -> None:  # about 9 MB (tracemalloc, full)
        self.capacity = capacity
        self._nodes: dict[bytes, bytes] = {}

    def over(self, store: NodeStore) -> CachedNodeStore:
        """`store` (one that checks what it reads), with the nodes read before answered from memory and the
        ones it reads now kept."""
        return CachedNodeStore(self._nodes, store, self.add)

    def add(self, node_hash: bytes, encoded: bytes) -> None:
        nodes = self._nodes
        nodes[node_hash] = encoded
        if len(nodes) > self.capacity:
            _drop_oldest(nodes, max(1, self.capacity // 8))

    def __len__(self) -> int:
        return len(self._nodes)


def load_node(store: NodeStore, node_hash: bytes, at: bytes | None = None) -> Node:
    """Fetch and decode a node that must exist (the caller never passes EMPTY)."""
    return fetch(store, node_hash, at)[0]


def fetch(store: NodeStore, node_hash: bytes, at: bytes | None = None) -> tuple[Node, bytes]:
    """A node that must exist, decoded, and as stored (where its children are: codec.child_locations)."""
    data = store.get(node_hash, at)
    if data is None:
        raise MissingNode(node_hash)
    node = decode(data)
    if node is None:
        raise CorruptNode(node_hash, MerkleReason.BAD_ENCODING)
    return node, data
