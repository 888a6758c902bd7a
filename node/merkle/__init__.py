"""Authenticated state: a compressed sparse Merkle tree over BLAKE3 with 256-bit key paths.

See docs/merkle.md for the node and hash definitions, the proof format and the figures. The LMDB node
store is node.merkle.lmdb_store (not re-exported here, so the package imports without LMDB).
"""

from node.merkle.codec import EMPTY, key_path, value_hash
from node.merkle.errors import CorruptNode, InvalidChange, MerkleError, MissingNode, ValueMismatch
from node.merkle.proof import MerkleProof
from node.merkle.query import Witness, get, get_hashed, proof_from_witness, prove, witness
from node.merkle.store import DictNodeStore, NodeStore
from node.merkle.update import (
    BlockNodes,
    InProcessUpdater,
    TreeUpdate,
    TreeUpdater,
    UpdateResult,
    build_tree,
    build_tree_hashed,
    update,
    update_hashed,
)
from node.merkle.verify import proof_root, verify_proof

__all__ = [
    "EMPTY",
    "BlockNodes",
    "CorruptNode",
    "DictNodeStore",
    "InProcessUpdater",
    "InvalidChange",
    "MerkleError",
    "MerkleProof",
    "MissingNode",
    "NodeStore",
    "TreeUpdate",
    "TreeUpdater",
    "UpdateResult",
    "ValueMismatch",
    "Witness",
    "build_tree",
    "build_tree_hashed",
    "get",
    "get_hashed",
    "key_path",
    "proof_from_witness",
    "proof_root",
    "prove",
    "update",
    "update_hashed",
    "value_hash",
    "verify_proof",
    "witness",
]
