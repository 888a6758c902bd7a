"""The Merkle proof a node hands to clients (mirrored field for field by the protobuf message)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class MerkleProof:
    """Inclusion proof (value set) or exclusion proof (value None) of one public state key.

    The walk goes from the root along `blake3(key)` and ends at `depth`: on the key's own leaf (inclusion),
    on an empty slot, or on a leaf of another path that shares the key's first `depth` bits (exclusion).
    """

    key: bytes
    """The public state key."""
    value: bytes | None
    """The value when proving inclusion; None for exclusion."""
    siblings: tuple[bytes, ...]
    """Non-EMPTY sibling hashes along the path, from the leaf's depth up to the root (deepest first)."""
    bitmap: bytes
    """32 bytes; bit d (MSB-first, d = depth from the root) set when the sibling at depth d is non-empty."""
    depth: int
    """Depth at which the walk ends (the leaf, the empty slot, or the conflicting leaf)."""
    other_path: bytes | None
    """Exclusion: path of a different leaf found at that position."""
    other_value_hash: bytes | None
    """Exclusion: value hash of that different leaf."""
