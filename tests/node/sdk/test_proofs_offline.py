"""The offline verifier stands alone: importing it loads no storage engine, and it verifies real proofs."""

from __future__ import annotations

import subprocess
import sys

from chain.v1 import proof_pb2
from node.merkle import DictNodeStore, build_tree, prove
from node.merkle.wire import proof_from_proto, proof_to_proto
from node.sdk.proofs import verify_operation_proof


def _modules_after_import(module: str) -> set[str]:
    code = f"import sys, {module}; print('\\n'.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    return set(out.split())


def test_importing_the_verifier_does_not_load_lmdb() -> None:
    loaded = _modules_after_import("node.sdk.proofs")
    assert "node.sdk.proofs" in loaded
    assert "lmdb" not in loaded
    assert not any(m.startswith("node.storage.lmdb") or m == "node.merkle.lmdb_store" for m in loaded)


def test_the_probe_sees_lmdb_when_it_is_loaded() -> None:
    """The check above can fail: the node's LMDB node store does load it."""
    assert "lmdb" in _modules_after_import("node.merkle.lmdb_store")


def test_wire_round_trip_and_verification() -> None:
    values = {b"alpha": b"1", b"beta": b"2"}
    result = build_tree(values)
    store = DictNodeStore(result.new_nodes)
    inclusion = proof_to_proto(prove(store, result.root, b"alpha", values.get))
    exclusion = proof_to_proto(prove(store, result.root, b"gamma", values.get))
    assert inclusion.exists and not exclusion.exists
    assert proof_to_proto(proof_from_proto(inclusion)) == inclusion
    assert verify_operation_proof(inclusion, result.root)
    assert verify_operation_proof(exclusion, result.root)
    forged = proof_pb2.MerkleProof()
    forged.CopyFrom(inclusion)
    forged.value = b"9"
    assert not verify_operation_proof(forged, result.root)
