"""Bulk construction of a compressed subtree from sorted leaves, in O(n) hashes.

Sorted paths determine the whole compressed tree: two neighbours in sorted order split at the bit where they
first differ (their common-prefix length), and the tree is the Cartesian tree of those split depths. One
left-to-right pass with a stack builds it: every leaf and every internal node is hashed exactly once, plus
one hash per chain node (an internal node with one empty child, where a whole subtree shares more prefix
bits than its parent's split).
"""

from __future__ import annotations

from collections.abc import Sequence

from blake3 import blake3

from node.errors import MerkleReason
from node.merkle.codec import EMPTY, INTERNAL_TAG, LEAF_TAG, NOWHERE, PATH_BITS, UNPLACED
from node.merkle.errors import InvalidChange

LEAF_BRANCH = PATH_BITS
"""Branch depth given to a leaf: it never needs chain nodes above it, because a lone leaf is lifted."""


def build_sorted(
    ints: Sequence[int],
    paths: Sequence[bytes],
    vhashes: Sequence[bytes],
    depth: int,
    *,
    out: dict[bytes, bytes],
    reuse: tuple[bytes, bytes] | None = None,
) -> bytes:
    """Hash of the subtree at `depth` holding exactly these leaves (bare nodes added to `out`): `build_placed`
    without locations."""
    return build_placed(ints, paths, vhashes, depth, out=out, reuse=reuse)[0]


def build_placed(
    ints: Sequence[int],
    paths: Sequence[bytes],
    vhashes: Sequence[bytes],
    depth: int,
    *,
    out: dict[bytes, bytes],
    reuse: tuple[bytes, bytes] | None = None,
    reuse_at: bytes = UNPLACED,
    here: bytes | None = None,
) -> tuple[bytes, bytes]:
    """Hash of the subtree at `depth` holding exactly these leaves; new nodes are added to `out`.

    `ints[i]` is `paths[i]` as an integer; the ints must be strictly increasing and share their first
    `depth` bits. `reuse` = (path, hash) of a leaf already in the store: it is not hashed or emitted again
    (`reuse_at`: where it is stored). `here`: the location of the nodes made now; with it, each new internal
    node goes into `out` in its stored form, followed by its children's locations (update.py, `Placed`).
    Returns the subtree's root and where it is (`here`, or `reuse_at` when it is the reused leaf alone).
    """
    count = len(ints)
    if count == 0:
        return EMPTY, NOWHERE
    hasher = blake3
    reuse_path, reuse_hash = reuse if reuse is not None else (None, EMPTY)
    made = here if here is not None else UNPLACED
    if count <= 2:  # most keys a block changes land alone under a node, or beside one old leaf: no stack
        return _small(ints, paths, vhashes, depth, out, reuse_path, reuse_hash, reuse_at, here)
    # Completed subtrees still waiting for their right-hand sibling, bottom to top:
    # hash, where it is stored, branch depth of their root (LEAF_BRANCH for a leaf), any path inside them,
    # depth of the join.
    st_hash: list[bytes] = []
    st_at: list[bytes] = []
    st_branch: list[int] = []
    st_sample: list[int] = []
    st_join: list[int] = []
    last = count - 1
    for i in range(count):
        path = paths[i]
        if path == reuse_path:
            node, node_at = reuse_hash, reuse_at
        else:
            encoded = LEAF_TAG + path + vhashes[i]
            node, node_at = hasher(encoded).digest(), made
            out[node] = encoded
        branch = LEAF_BRANCH
        sample = ints[i]
        if i < last:
            join = PATH_BITS - (sample ^ ints[i + 1]).bit_length()
            if join >= PATH_BITS:
                raise InvalidChange(MerkleReason.DUPLICATE_PATH, path)
        else:
            join = depth - 1
        while st_join and st_join[-1] > join:
            at = st_join.pop()
            left, left_at = _chain(st_hash.pop(), st_at.pop(), st_branch.pop(), st_sample[-1], at + 1, out, here)
            right, right_at = _chain(node, node_at, branch, sample, at + 1, out, here)
            encoded = INTERNAL_TAG + left + right
            node, node_at = hasher(encoded).digest(), made
            out[node] = encoded if here is None else encoded + left_at + right_at
            branch = at
            sample = st_sample.pop()
        st_hash.append(node)
        st_at.append(node_at)
        st_branch.append(branch)
        st_sample.append(sample)
        st_join.append(join)
    return _chain(st_hash[0], st_at[0], st_branch[0], st_sample[0], depth, out, here)


def _small(
    ints: Sequence[int],
    paths: Sequence[bytes],
    vhashes: Sequence[bytes],
    depth: int,
    out: dict[bytes, bytes],
    reuse_path: bytes | None,
    reuse_hash: bytes,
    reuse_at: bytes,
    here: bytes | None,
) -> tuple[bytes, bytes]:
    """`build_placed` of one or two leaves: each leaf (the reused one as it is), then for two their parent
    where their paths part and the chain nodes above it."""
    made = here if here is not None else UNPLACED
    leaves = []
    for path, vhash in zip(paths, vhashes, strict=True):
        if path == reuse_path:
            leaves.append((reuse_hash, reuse_at))
        else:
            encoded = LEAF_TAG + path + vhash
            node = blake3(encoded).digest()
            out[node] = encoded
            leaves.append((node, made))
    if len(leaves) == 1:
        return leaves[0]
    join = PATH_BITS - (ints[0] ^ ints[1]).bit_length()
    if join >= PATH_BITS:
        raise InvalidChange(MerkleReason.DUPLICATE_PATH, paths[0])
    (left, left_at), (right, right_at) = leaves
    encoded = INTERNAL_TAG + left + right
    node = blake3(encoded).digest()
    out[node] = encoded if here is None else encoded + left_at + right_at
    return _chain(node, made, join, ints[0], depth, out, here)


def _chain(
    node: bytes, node_at: bytes, branch: int, sample: int, depth: int, out: dict[bytes, bytes], here: bytes | None
) -> tuple[bytes, bytes]:
    """Place a subtree whose root branches at `branch` at position `depth` by adding chain nodes above it;
    the subtree's new root and where it is."""
    if branch == LEAF_BRANCH:
        return node, node_at
    hasher = blake3
    for level in range(branch - 1, depth - 1, -1):
        right = (sample >> (PATH_BITS - 1 - level)) & 1
        encoded = INTERNAL_TAG + (EMPTY + node if right else node + EMPTY)
        placed = encoded if here is None else encoded + (NOWHERE + node_at if right else node_at + NOWHERE)
        node = hasher(encoded).digest()
        out[node] = placed
        node_at = here if here is not None else UNPLACED
    return node, node_at
