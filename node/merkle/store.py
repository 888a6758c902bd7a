"""Content-addressed node stores: a node's bytes are kept under its hash, and nothing is ever overwritten.

Old nodes are never deleted, so every past root stays readable (snapshots, stale-proof checks). There is no
garbage collection yet: the node store only grows, by the nodes each `UpdateResult` hands back.

The LMDB backend is node.merkle.lmdb_store, imported by the node only: proof verification and in-memory
trees never load LMDB.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from node.errors import MerkleReason
from node.merkle.codec import Node, decode
from node.merkle.errors import CorruptNode, MissingNode


class NodeStore(Protocol):
    def get(self, node_hash: bytes) -> bytes | None:
        """The encoded node stored under `node_hash`, or None."""
        ...


class DictNodeStore:
    """In-memory store for tests and tools."""

    def __init__(self, nodes: Mapping[bytes, bytes] | None = None) -> None:
        self._nodes: dict[bytes, bytes] = dict(nodes) if nodes else {}

    def get(self, node_hash: bytes) -> bytes | None:
        return self._nodes.get(node_hash)

    def put_nodes(self, nodes: Mapping[bytes, bytes]) -> None:
        self._nodes.update(nodes)

    def __len__(self) -> int:
        return len(self._nodes)


def load_node(store: NodeStore, node_hash: bytes) -> Node:
    """Fetch and decode a node that must exist (the caller never passes EMPTY)."""
    data = store.get(node_hash)
    if data is None:
        raise MissingNode(node_hash)
    node = decode(data)
    if node is None:
        raise CorruptNode(node_hash, MerkleReason.BAD_ENCODING)
    return node
