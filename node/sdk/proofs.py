"""Offline proof verification for clients: needs nothing but the proof and a root.

`verify_inclusion` checks that a proof proves one key present (with its value), `verify_exclusion` that it
proves the key absent: each checks the statement asked for, not only that the proof holds.
`verify_operation_proof` is the statement-agnostic check (True for a valid inclusion *or* exclusion proof:
the caller reads `exists`). `verify_storage_quota_proof` checks an account's whole storage: the account
row, the grant index (the complete list of its grant ids) and each grant, all against one root, and
recomputes the active units.

The clients' proof reads return `InclusionProof`, `ExclusionProof` and `QuotaProof`: the node's response
with a `verify(root)` that checks what was asked. The root to trust is one the caller got independently
(e.g. `get_block(block_number=n).block.header.state_root` from a node it trusts), never only the root that
came with the proof.

Importing this module loads no storage engine (no LMDB) and none of the node's server code.
The wire conversion (`proof_from_proto`, `proof_to_proto`) is node.merkle.wire.
"""

from __future__ import annotations

from dataclasses import dataclass

from chain.v1 import proof_pb2, rpc_pb2, state_pb2
from node.merkle.verify import verify_proof
from node.merkle.wire import proof_from_proto
from node.sdk import statekeys


def verify_operation_proof(proof: proof_pb2.MerkleProof, root: bytes) -> bool:
    """True when the proof holds against `root`, whichever it proves (inclusion of key=value, or exclusion of
    key): check `proof.exists`, or use `verify_inclusion`/`verify_exclusion`."""
    return verify_proof(proof_from_proto(proof), root)


def verify_inclusion(proof: proof_pb2.MerkleProof, root: bytes, key: bytes, value: bytes | None = None) -> bool:
    """True only when `proof` proves `key` present under `root` (with `value`, when given)."""
    if bytes(proof.key) != key or not proof.exists:
        return False
    if value is not None and bytes(proof.value) != value:
        return False
    return verify_operation_proof(proof, root)


def verify_exclusion(proof: proof_pb2.MerkleProof, root: bytes, key: bytes) -> bool:
    """True only when `proof` proves `key` absent under `root`."""
    if bytes(proof.key) != key or proof.exists:
        return False
    return verify_operation_proof(proof, root)


@dataclass(frozen=True)
class InclusionProof:
    """GetOperationProof's answer for `key`: `verify(root)` is True only if it proves `key` present."""

    key: bytes
    response: rpc_pb2.GetOperationProofResponse

    @property
    def proof(self) -> proof_pb2.MerkleProof:
        """The Merkle proof."""
        return self.response.proof

    @property
    def value(self) -> bytes:
        """The value the proof commits to (the state record's bytes)."""
        return bytes(self.response.proof.value)

    @property
    def state_root(self) -> bytes:
        """The root the node proved against (its head block's)."""
        return bytes(self.response.state_root)

    @property
    def block_number(self) -> int:
        """The block whose state root that is."""
        return int(self.response.block_number)

    def verify(self, root: bytes) -> bool:
        """True when the proof shows `key` present with `value` under `root`."""
        return verify_inclusion(self.response.proof, root, self.key)


@dataclass(frozen=True)
class ExclusionProof:
    """GetExclusionProof's answer for `key`: `verify(root)` is True only if it proves `key` absent."""

    key: bytes
    response: rpc_pb2.GetExclusionProofResponse

    @property
    def proof(self) -> proof_pb2.MerkleProof:
        """The Merkle proof."""
        return self.response.proof

    @property
    def state_root(self) -> bytes:
        """The root the node proved against (its head block's)."""
        return bytes(self.response.state_root)

    @property
    def block_number(self) -> int:
        """The block whose state root that is."""
        return int(self.response.block_number)

    def verify(self, root: bytes) -> bool:
        """True when the proof shows `key` absent under `root`."""
        return verify_exclusion(self.response.proof, root, self.key)


@dataclass(frozen=True)
class QuotaProof:
    """GetStorageQuotaProof's answer for `owner_address`: `verify(root)` checks the whole bundle."""

    owner_address: bytes
    response: rpc_pb2.GetStorageQuotaProofResponse

    @property
    def proof(self) -> proof_pb2.StorageQuotaProof:
        """The bundle: account row, grant index and every grant, with their proofs."""
        return self.response.proof

    @property
    def active_units(self) -> int:
        """The active storage units the node claims (trust it once `verify` is True)."""
        return int(self.response.proof.active_units)

    def verify(self, root: bytes) -> bool:
        """True when the bundle is for `owner_address`, complete and valid against `root`, and its active
        units are what its grants add up to."""
        bundle = self.response.proof
        if bytes(bundle.owner_address) != self.owner_address:
            return False
        return verify_storage_quota_proof(bundle, root) is not None


def verify_storage_quota_proof(bundle: proof_pb2.StorageQuotaProof, root: bytes) -> int | None:
    """The account's active storage units if the bundle is complete and valid against `root`, else None."""
    owner = bytes(bundle.owner_address)
    if bytes(bundle.state_root) != root:
        return None
    account_proof = bundle.account_proof
    if account_proof.key != statekeys.account_key(owner) or not verify_operation_proof(account_proof, root):
        return None
    index_proof = bundle.index_proof
    if index_proof.key != statekeys.storage_grant_index_key(owner) or not verify_operation_proof(index_proof, root):
        return None
    index = state_pb2.StorageGrantIndex()
    if index_proof.exists:
        index.ParseFromString(index_proof.value)
    proofs = {bytes(p.key): p for p in bundle.grant_proofs}
    units = 0
    for grant_id in index.grant_ids:
        p = proofs.get(statekeys.storage_grant_key(owner, grant_id))
        if p is None or not p.exists or not verify_operation_proof(p, root):
            return None
        grant = state_pb2.StorageGrant()
        grant.ParseFromString(p.value)
        if grant.expires_at > bundle.block_timestamp:
            units += grant.units
    if units != bundle.active_units:
        return None
    return units
