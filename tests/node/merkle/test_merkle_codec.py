from __future__ import annotations

import ast
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import node.merkle.proof
import node.merkle.verify
from node.merkle import EMPTY, CorruptNode, DictNodeStore, MissingNode, ValueMismatch, prove, update
from node.merkle.codec import (
    Internal,
    Leaf,
    common_prefix_bits,
    decode,
    encode_internal,
    encode_leaf,
    node_hash,
    path_bit,
)
from node.merkle.proof import MerkleProof
from node.merkle.store import load_node
from node.merkle.verify import _root_for_path

hashes = st.binary(min_size=32, max_size=32)


@given(hashes, hashes)
def test_codec_roundtrip(a: bytes, b: bytes) -> None:
    assert decode(encode_leaf(a, b)) == Leaf(a, b)
    assert decode(encode_internal(a, b)) == Internal(a, b)
    assert len(encode_leaf(a, b)) == len(encode_internal(a, b)) == 65


@given(st.binary())
def test_decode_rejects_garbage(data: bytes) -> None:
    if len(data) != 65 or data[0] > 1:
        assert decode(data) is None


@given(hashes, hashes, hashes)
def test_verifier_restates_the_same_hashes(path: bytes, vhash: bytes, sibling: bytes) -> None:
    """verify.py re-implements leaf and internal hashing; it must agree with the codec."""
    sibling = sibling if sibling != EMPTY else b"\x01" * 32
    leaf = node_hash(encode_leaf(path, vhash))
    other = path[:31] + bytes([path[31] ^ 1])  # shares the first 255 bits
    bitmap = (1 << 255).to_bytes(32, "big")
    proof = MerkleProof(b"", None, (sibling,), bitmap, 1, path, vhash)
    expected = encode_internal(sibling, leaf) if path_bit(path, 0) else encode_internal(leaf, sibling)
    assert _root_for_path(proof, other) == node_hash(expected)


def test_bits() -> None:
    path = bytes([0b1010_0000]) + bytes(31)
    assert [path_bit(path, d) for d in range(4)] == [1, 0, 1, 0]
    assert common_prefix_bits(path, path) == 256
    assert common_prefix_bits(path, bytes(32)) == 0
    assert common_prefix_bits(bytes(31) + b"\x01", bytes(32)) == 255


def test_missing_and_corrupt_nodes_raise() -> None:
    with pytest.raises(MissingNode) as missing:
        load_node(DictNodeStore(), b"\x07" * 32)
    assert missing.value.node_hash == b"\x07" * 32
    with pytest.raises(CorruptNode):
        load_node(DictNodeStore({b"\x07" * 32: b"\x02" + bytes(64)}), b"\x07" * 32)
    with pytest.raises(MissingNode):
        update(DictNodeStore(), b"\x07" * 32, {b"k": b"v"})


def test_prove_rejects_a_value_store_out_of_sync() -> None:
    result = update(DictNodeStore(), EMPTY, {b"k": b"v", b"j": b"w"})
    store = DictNodeStore(result.new_nodes)
    with pytest.raises(ValueMismatch) as wrong:
        prove(store, result.root, b"k", lambda _key: b"not v")
    assert wrong.value.key == b"k"
    with pytest.raises(ValueMismatch):
        prove(store, result.root, b"k", lambda _key: None)
    # absent key: the lookup is never consulted
    assert prove(store, result.root, b"absent", lambda _key: pytest.fail("looked up")).value is None


def test_verifier_imports_only_blake3_and_the_proof() -> None:
    """The client SDK re-exports verify.py: it must stay free of node internals."""
    for module, allowed in (
        (node.merkle.verify, {"__future__", "blake3", "node.merkle.proof"}),
        (node.merkle.proof, {"__future__", "dataclasses"}),
    ):
        tree = ast.parse(Path(str(module.__file__)).read_text())
        imported: set[str] = set()
        for stmt in ast.walk(tree):
            if isinstance(stmt, ast.Import):
                imported.update(alias.name for alias in stmt.names)
            elif isinstance(stmt, ast.ImportFrom):
                imported.add(stmt.module or "")
        assert imported <= allowed, module.__name__
