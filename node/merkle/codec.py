"""Node encoding and hashing: the one place that defines what a tree node's bytes and hash are.

    path(key)            = blake3(key)                      32 bytes, bit 0 = MSB of byte 0
    value_hash(value)    = blake3(value)                    32 bytes
    EMPTY                = 32 zero bytes                    hash of an empty subtree (never stored)
    leaf encoding        = 0x00 || path || value_hash       65 bytes
    internal encoding    = 0x01 || left_hash || right_hash  65 bytes
    node hash            = blake3(encoding)

`node.merkle.verify` restates the two hash rules on purpose (it may import nothing but blake3 and the proof
dataclass); `tests/node/merkle/test_codec.py` checks that both agree.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import NamedTuple

from blake3 import blake3

HASH_LEN = 32
PATH_BITS = 256
NODE_LEN = 1 + 2 * HASH_LEN
PLACED_INTERNAL_LEN = NODE_LEN + 16  # an internal node as stored on disk: its encoding, then two locations
# A location is an opaque 8-byte tag a store gives a node (the LMDB store: the number of the block that stored
# it, node/storage/tree_layout.py). The tree only copies it from a parent to a walk, or into a new parent.
UNPLACED = b"\xff" * 8  # the children of a node stored without locations (by hash alone)
NOWHERE = bytes(8)  # the location written for an EMPTY child: no walk fetches it
EMPTY = bytes(HASH_LEN)
LEAF_TAG = b"\x00"
INTERNAL_TAG = b"\x01"


class Leaf(NamedTuple):
    path: bytes
    value_hash: bytes


class Internal(NamedTuple):
    left: bytes
    right: bytes


Node = Leaf | Internal

# tuple.__new__ bound to each class: builds the same named tuple as Leaf(a, b) without the generated
# __new__'s Python frame (decoding is on every tree walk: each proof and each block's update)
_new_leaf: Callable[[tuple[bytes, bytes]], Leaf] = partial(tuple.__new__, Leaf)
_new_internal: Callable[[tuple[bytes, bytes]], Internal] = partial(tuple.__new__, Internal)


def key_path(key: bytes) -> bytes:
    """The 256-bit tree path of a public state key."""
    return blake3(key).digest()


def value_hash(value: bytes) -> bytes:
    return blake3(value).digest()


def encode_leaf(path: bytes, vhash: bytes) -> bytes:
    return LEAF_TAG + path + vhash


def encode_internal(left: bytes, right: bytes) -> bytes:
    return INTERNAL_TAG + left + right


def node_hash(encoded: bytes) -> bytes:
    return blake3(encoded).digest()


def decode(encoded: bytes) -> Node | None:
    """Decode a node as encoded or as stored (an internal node may be followed by its children's places on
    disk, 16 bytes: node/storage/tree_layout.py); None when the bytes are not a well-formed node."""
    size = len(encoded)
    tag = encoded[0] if size else -1
    if tag == 1 and size in (NODE_LEN, PLACED_INTERNAL_LEN):
        return _new_internal((encoded[1:33], encoded[33:65]))
    if tag == 0 and size == NODE_LEN:
        return _new_leaf((encoded[1:33], encoded[33:65]))
    return None


def child_locations(stored: bytes) -> tuple[bytes, bytes]:
    """Where an internal node's children are, from its stored form (UNPLACED for a node stored bare)."""
    if len(stored) == PLACED_INTERNAL_LEN:
        return stored[65:73], stored[73:81]
    return UNPLACED, UNPLACED


def path_bit(path: bytes, depth: int) -> int:
    """Bit `depth` of a path, MSB-first: 0 = go left, 1 = go right."""
    return (path[depth >> 3] >> (7 - (depth & 7))) & 1


def path_int(path: bytes) -> int:
    """A path as a 256-bit integer; integer order equals byte order, so sorted ints are sorted paths."""
    return int.from_bytes(path, "big")


def common_prefix_bits(a: bytes, b: bytes) -> int:
    """How many leading bits two paths share (256 when equal)."""
    return PATH_BITS - (path_int(a) ^ path_int(b)).bit_length()
