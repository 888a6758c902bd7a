"""Offline proof verification for clients: needs nothing but the proof and a root.

`verify_operation_proof` checks one key's inclusion (with its value) or
exclusion; `verify_storage_quota_proof` checks an account's whole storage:
the account row, the grant index (the complete list of its grant ids) and
each grant, all against one root, and recomputes the active units.

Importing this module loads no storage engine (no LMDB): a client verifies with the proof and a root alone.
The wire conversion (`proof_from_proto`, `proof_to_proto`) is node.merkle.wire.
"""

from __future__ import annotations

from chain.v1 import proof_pb2, state_pb2
from node.merkle.verify import verify_proof
from node.merkle.wire import proof_from_proto
from node.storage import schema


def verify_operation_proof(proof: proof_pb2.MerkleProof, root: bytes) -> bool:
    """True when the proof holds against `root` (inclusion of key=value, or exclusion of key)."""
    return verify_proof(proof_from_proto(proof), root)


def verify_storage_quota_proof(bundle: proof_pb2.StorageQuotaProof, root: bytes) -> int | None:
    """The account's active storage units if the bundle is complete and valid against `root`, else None."""
    owner = bytes(bundle.owner_address)
    if bytes(bundle.state_root) != root:
        return None
    if bundle.account_proof.key != schema.account_key(owner) or not verify_operation_proof(bundle.account_proof, root):
        return None
    index_proof = bundle.index_proof
    if index_proof.key != schema.storage_grant_index_key(owner) or not verify_operation_proof(index_proof, root):
        return None
    index = state_pb2.StorageGrantIndex()
    if index_proof.exists:
        index.ParseFromString(index_proof.value)
    proofs = {bytes(p.key): p for p in bundle.grant_proofs}
    units = 0
    for grant_id in index.grant_ids:
        p = proofs.get(schema.storage_grant_key(owner, grant_id))
        if p is None or not p.exists or not verify_operation_proof(p, root):
            return None
        grant = state_pb2.StorageGrant()
        grant.ParseFromString(p.value)
        if grant.expires_at > bundle.block_timestamp:
            units += grant.units
    if units != bundle.active_units:
        return None
    return units
