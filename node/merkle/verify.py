"""Offline proof verification, for clients: recomputes the root a `MerkleProof` commits to.

Self-contained on purpose (the client SDK re-exports it): it imports only blake3 and the proof dataclass,
so the two hash rules are restated here. Never raises on a malformed proof; it is simply not valid.

    leaf hash      = blake3(0x00 || path || value_hash)
    internal hash  = blake3(0x01 || left || right)
    empty subtree  = 32 zero bytes
"""

from __future__ import annotations

from blake3 import blake3

from node.merkle.proof import MerkleProof

_HASH_LEN = 32
_BITS = 256
_EMPTY = bytes(_HASH_LEN)


def verify_proof(proof: MerkleProof, root: bytes) -> bool:
    """True when `proof` is well formed and proves its statement against `root`.

    Inclusion (`proof.value` set): the leaf (key, value) sits at `proof.depth`. Exclusion: the slot at
    `proof.depth` on the key's path is empty, or holds a leaf of another path sharing those `depth` bits.
    """
    if not isinstance(root, bytes) or len(root) != _HASH_LEN:
        return False
    implied = proof_root(proof)
    return implied is not None and implied == root


def proof_root(proof: MerkleProof) -> bytes | None:
    """The root a well-formed proof commits to, or None when the proof is malformed.

    A proof that is well formed but whose root is not the current one is stale (or forged): compare this
    against the roots you know to tell which.
    """
    if not isinstance(proof, MerkleProof) or not isinstance(proof.key, bytes):
        return None
    return _root_for_path(proof, blake3(proof.key).digest())


def _root_for_path(proof: MerkleProof, path: bytes) -> bytes | None:
    """`proof_root` with the key's path given (the proof's key is then ignored)."""
    depth = proof.depth
    if len(path) != _HASH_LEN or type(depth) is not int or not 0 <= depth <= _BITS:
        return None
    bitmap = proof.bitmap
    siblings = proof.siblings
    if not isinstance(bitmap, bytes) or len(bitmap) != _HASH_LEN or not isinstance(siblings, tuple):
        return None
    for sibling in siblings:
        if not isinstance(sibling, bytes) or len(sibling) != _HASH_LEN or sibling == _EMPTY:
            return None
    bits = int.from_bytes(bitmap, "big")
    if bits & ((1 << (_BITS - depth)) - 1):
        return None  # a sibling flagged at or below the end of the walk
    if bits.bit_count() != len(siblings):
        return None
    if depth > 0 and not (bits >> (_BITS - depth)) & 1:
        return None  # the last step has an empty sibling: that leaf or empty slot cannot exist there
    node = _terminal(proof, path, depth)
    if node is None:
        return None
    key_bits = int.from_bytes(path, "big")
    remaining = iter(siblings)
    for level in range(depth - 1, -1, -1):
        shift = _BITS - 1 - level
        sibling = next(remaining) if (bits >> shift) & 1 else _EMPTY
        if (key_bits >> shift) & 1:
            node = blake3(b"\x01" + sibling + node).digest()
        else:
            node = blake3(b"\x01" + node + sibling).digest()
    return node


def _terminal(proof: MerkleProof, path: bytes, depth: int) -> bytes | None:
    """Hash of the node where the walk ends, or None when the end of the proof is malformed."""
    value, other_path, other_value_hash = proof.value, proof.other_path, proof.other_value_hash
    if value is not None:
        if not isinstance(value, bytes) or other_path is not None or other_value_hash is not None:
            return None
        return blake3(b"\x00" + path + blake3(value).digest()).digest()
    if other_path is None:
        return _EMPTY if other_value_hash is None else None
    if (
        not isinstance(other_path, bytes)
        or len(other_path) != _HASH_LEN
        or not isinstance(other_value_hash, bytes)
        or len(other_value_hash) != _HASH_LEN
        or other_path == path
    ):
        return None
    if (int.from_bytes(other_path, "big") ^ int.from_bytes(path, "big")) >> (_BITS - depth):
        return None  # the other leaf does not lie on the key's path down to `depth`
    return blake3(b"\x00" + other_path + other_value_hash).digest()
