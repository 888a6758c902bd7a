"""Errors of the state tree: one root, split by meaning, each carrying the values that caused it.

Their reasons are `MerkleReason` members (node/errors.py, the one vocabulary): all of them are bugs of the
caller or of storage, which a client only ever sees as `INTERNAL`.
"""

from __future__ import annotations

from node.errors import MerkleReason


class MerkleError(Exception):
    """Root of every error raised by `node.merkle`."""


class InvalidChange(MerkleError, ValueError):
    """A caller handed the tree a change it cannot apply (the caller's bug, not the tree's)."""

    def __init__(self, reason: MerkleReason, path: bytes) -> None:
        super().__init__(f"{reason.value}: path={path.hex()}")
        self.reason = reason
        self.path = path


class MissingNode(MerkleError):
    """Internal invariant broken: a node reachable from a root is not in the store."""

    def __init__(self, node_hash: bytes) -> None:
        super().__init__(f"node {node_hash.hex()} is missing from the node store")
        self.node_hash = node_hash


class CorruptNode(MerkleError):
    """Internal invariant broken: a stored node does not decode, or breaks the compressed-tree shape."""

    def __init__(self, node_hash: bytes, reason: MerkleReason, detail: str = "") -> None:
        super().__init__(f"node {node_hash.hex()} is corrupt: {reason.value}" + (f" {detail}" if detail else ""))
        self.node_hash = node_hash
        self.reason = reason
        self.detail = detail


class ValueMismatch(MerkleError):
    """The caller's value store disagrees with the tree: the value it returned does not hash to the leaf."""

    def __init__(self, key: bytes, expected_value_hash: bytes, got_value_hash: bytes | None) -> None:
        got = "no value" if got_value_hash is None else got_value_hash.hex()
        super().__init__(f"value of key {key.hex()}: tree has {expected_value_hash.hex()}, lookup gave {got}")
        self.key = key
        self.expected_value_hash = expected_value_hash
        self.got_value_hash = got_value_hash
