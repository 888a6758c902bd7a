"""Proofs on the wire: `MerkleProof` <-> `chain.v1.MerkleProof`.

The node encodes proofs it serves (node.query) and clients decode the ones they verify (node.sdk.proofs);
both use this one conversion, which lives with the proof format it mirrors.
"""

from __future__ import annotations

from chain.v1 import proof_pb2
from node.merkle.proof import MerkleProof


def proof_from_proto(p: proof_pb2.MerkleProof) -> MerkleProof:
    return MerkleProof(
        key=bytes(p.key),
        value=bytes(p.value) if p.exists else None,
        siblings=tuple(bytes(s) for s in p.siblings),
        bitmap=bytes(p.bitmap),
        depth=int(p.depth),
        other_path=bytes(p.other_path) if p.other_path else None,
        other_value_hash=bytes(p.other_value_hash) if p.other_value_hash else None,
    )


def proof_to_proto(p: MerkleProof) -> proof_pb2.MerkleProof:
    return proof_pb2.MerkleProof(
        key=p.key,
        exists=p.value is not None,
        value=p.value or b"",
        siblings=list(p.siblings),
        bitmap=p.bitmap,
        depth=p.depth,
        other_path=p.other_path or b"",
        other_value_hash=p.other_value_hash or b"",
    )
