"""Proof vectors: inclusion, exclusion and storage-quota proofs against the scenario chain's state root.

Proofs are produced by the node's own read path (`node.query.reader.Reader`, what GetOperationProof,
GetExclusionProof and GetStorageQuotaProof answer) and given twice: as the `chain.v1.MerkleProof` protobuf
(binary, hex) and field by field. Tampered copies carry `valid: false`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from chain.v1 import proof_pb2, rpc_pb2, state_pb2
from node.merkle.codec import key_path
from node.query.reader import Reader
from node.storage import schema
from tests.conformance import fixed
from tests.conformance.fixed import h
from tests.conformance.scenario import Scenario, commit


def proof_json(p: proof_pb2.MerkleProof) -> dict[str, Any]:
    return {
        "key": h(p.key),
        "exists": p.exists,
        "value": h(p.value),
        "siblings": [h(s) for s in p.siblings],
        "bitmap": h(p.bitmap),
        "depth": p.depth,
        "other_path": h(p.other_path),
        "other_value_hash": h(p.other_value_hash),
    }


def _entry(name: str, kind: str, p: proof_pb2.MerkleProof, root: bytes, *, valid: bool = True) -> dict[str, Any]:
    return {
        "name": name,
        "kind": kind,
        "root": h(root),
        "valid": valid,
        "path": h(key_path(bytes(p.key))),
        "proof_proto": h(p.SerializeToString(deterministic=True)),
        "proof": proof_json(p),
    }


def _tampered(base: proof_pb2.MerkleProof, how: Callable[[proof_pb2.MerkleProof], None]) -> proof_pb2.MerkleProof:
    p = proof_pb2.MerkleProof()
    p.CopyFrom(base)
    how(p)
    return p


def _flip_first_byte(b: bytes) -> bytes:
    return bytes([b[0] ^ 0x01]) + b[1:]


def _flip_sibling(p: proof_pb2.MerkleProof) -> None:
    p.siblings[0] = _flip_first_byte(p.siblings[0])


def _drop_bitmap_bit(p: proof_pb2.MerkleProof) -> None:
    last = max(d for d in range(p.depth) if p.bitmap[d // 8] >> (7 - d % 8) & 1)
    bitmap = bytearray(p.bitmap)
    bitmap[last // 8] ^= 1 << (7 - last % 8)
    p.bitmap = bytes(bitmap)


def _claim_absent(p: proof_pb2.MerkleProof) -> None:
    p.exists, p.value = False, b""


def _claim_present(p: proof_pb2.MerkleProof) -> None:
    p.exists, p.value = True, b"\x01"


def _exclusions(reader: Reader) -> dict[str, proof_pb2.MerkleProof]:
    """An absent key whose walk ends on an empty slot, and one whose walk ends on another key's leaf."""
    found: dict[str, proof_pb2.MerkleProof] = {}
    for i in range(1000):
        key = schema.account_key(fixed.seed(f"absent/{i}")[:20])
        p = reader.get_exclusion_proof(rpc_pb2.GetExclusionProofRequest(key=key)).proof
        found.setdefault("exclusion_leaf" if p.other_path else "exclusion_empty", p)
        if len(found) == 2:
            return found
    raise AssertionError("no absent key of each kind among 1000 candidates")


def _quota(reader: Reader, s: Scenario, root: bytes) -> list[dict[str, Any]]:
    bundle = reader.get_storage_quota_proof(rpc_pb2.GetStorageQuotaProofRequest(owner_address=s.alice.address)).proof
    hidden = proof_pb2.StorageQuotaProof()
    hidden.CopyFrom(bundle)
    del hidden.grant_proofs[-1]
    del hidden.active_grants[-1]
    hidden.active_units -= bundle.active_grants[-1].units
    inflated = proof_pb2.StorageQuotaProof()
    inflated.CopyFrom(bundle)
    inflated.active_units += 1
    cases = [("alice", bundle, root, bundle.active_units), ("hidden_grant", hidden, root, None)]
    cases += [("inflated_units", inflated, root, None), ("other_root", bundle, _flip_first_byte(root), None)]
    return [
        {
            "name": name,
            "root": h(r),
            "active_units": units,
            "bundle_proto": h(b.SerializeToString(deterministic=True)),
            "bundle": _bundle_json(b),
        }
        for name, b, r, units in cases
    ]


def _bundle_json(b: proof_pb2.StorageQuotaProof) -> dict[str, Any]:
    return {
        "owner_address": h(b.owner_address),
        "state_root": h(b.state_root),
        "block_number": b.block_number,
        "block_timestamp": b.block_timestamp,
        "account_proof": proof_json(b.account_proof),
        "index_proof": proof_json(b.index_proof),
        "grant_proofs": [proof_json(p) for p in b.grant_proofs],
        "active_grants": [_grant_json(g) for g in b.active_grants],
        "active_units": b.active_units,
    }


def _grant_json(g: state_pb2.StorageGrant) -> dict[str, Any]:
    return {
        "grant_id": h(g.grant_id),
        "owner_address": h(g.owner_address),
        "units": g.units,
        "granted_at": g.granted_at,
        "expires_at": g.expires_at,
        "authority_address": h(g.authority_address),
    }


def _proofs(reader: Reader, s: Scenario, root: bytes) -> list[dict[str, Any]]:
    def prove(key: bytes) -> proof_pb2.MerkleProof:
        return reader.get_operation_proof(rpc_pb2.GetOperationProofRequest(key=key)).proof

    pid, alice = s.project_id, s.alice.address
    included = {
        "account_alice": prove(schema.account_key(alice)),
        "project_hello": prove(schema.project_key(pid)),
        "ref_main": prove(schema.ref_key(pid, b"refs/heads/main")),
        "commit_2": prove(schema.commit_key(pid, commit(2).hash)),
        "custody_key_p256": prove(schema.custody_key_key(alice, fixed.p256("alice/p256").address)),
    }
    out = [_entry(name, "inclusion", p, root) for name, p in included.items()]
    excluded = _exclusions(reader)
    out += [_entry(f"absent_{kind}", kind, p, root) for kind, p in excluded.items()]
    base = included["project_hello"]
    bad: dict[str, proof_pb2.MerkleProof] = {
        "tampered_sibling": _tampered(base, _flip_sibling),
        "tampered_value": _tampered(base, lambda p: setattr(p, "value", p.value + b"\x00")),
        "tampered_bitmap": _tampered(base, _drop_bitmap_bit),
        "other_key": _tampered(base, lambda p: setattr(p, "key", schema.project_key(fixed.seed("no-such-project")))),
        "inclusion_claimed_absent": _tampered(base, _claim_absent),
        "exclusion_claimed_present": _tampered(excluded["exclusion_empty"], _claim_present),
        "depth_out_of_range": _tampered(base, lambda p: setattr(p, "depth", 257)),
    }
    out += [_entry(name, "tampered", p, root, valid=False) for name, p in bad.items()]
    out.append(_entry("wrong_root", "tampered", base, _flip_first_byte(root), valid=False))
    return out


def family(s: Scenario) -> dict[str, Any]:
    head = s.h.chain.head()
    root = bytes(head.header.state_root)
    with s.h.chain.read() as (view, nodes):
        reader = Reader(view, nodes)
        proofs = _proofs(reader, s, root)
        quota = _quota(reader, s, root)
    return {
        "family": "proofs",
        "version": fixed.VERSION,
        "description": (
            "Inclusion and exclusion proofs of public state keys, and a storage-quota proof bundle, against the "
            "state root of the scenario chain's last block (the messages family), as the node's proof RPCs "
            "return them; tampered copies must not verify. Verification rules: docs/merkle.md; the MerkleProof "
            "message maps onto the documented proof as docs/merkle.md says."
        ),
        "block_number": int(head.header.number),
        "block_timestamp_ms": int(head.header.timestamp_ms),
        "state_root": h(root),
        "proofs": proofs,
        "storage_quota": quota,
    }
