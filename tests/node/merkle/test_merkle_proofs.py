"""Proofs: every present key proves inclusion, every absent key exclusion, and tampering is caught."""

from __future__ import annotations

import dataclasses
from typing import Any, cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from node.merkle import (
    EMPTY,
    DictNodeStore,
    MerkleProof,
    ValueMismatch,
    build_tree,
    build_tree_hashed,
    get,
    key_path,
    proof_from_witness,
    proof_root,
    prove,
    value_hash,
    verify_proof,
    witness,
)
from node.merkle.verify import _root_for_path
from tests.node.merkle.merkle_model import clustered_paths, key_values, keys, values


def tree(items: dict[bytes, bytes]) -> tuple[DictNodeStore, bytes]:
    result = build_tree(items)
    return DictNodeStore(result.new_nodes), result.root


def flip(data: bytes, bit: int) -> bytes:
    out = bytearray(data)
    out[bit // 8] ^= 0x80 >> (bit % 8)
    return bytes(out)


@settings(max_examples=200)
@given(key_values, st.lists(keys, max_size=10))
def test_every_key_proves_inclusion_or_exclusion(items: dict[bytes, bytes], probes: list[bytes]) -> None:
    store, root = tree(items)
    for key in [*items, *probes]:
        proof = prove(store, root, key, items.get)
        assert verify_proof(proof, root)
        assert proof_root(proof) == root
        if key in items:
            assert proof.value == items[key]
            assert proof.other_path is None and proof.other_value_hash is None
        else:
            assert proof.value is None
            if proof.other_path is not None:
                assert get(store, root, key) is None
                assert proof.other_path != key_path(key)


@given(key_values, values)
def test_inclusion_with_another_value_fails(items: dict[bytes, bytes], other: bytes) -> None:
    store, root = tree(items)
    for key, value in items.items():
        proof = prove(store, root, key, items.get)
        if other != value:
            assert not verify_proof(dataclasses.replace(proof, value=other), root)
        # and a present key cannot be passed off as absent
        assert not verify_proof(dataclasses.replace(proof, value=None), root)


@given(key_values, keys, values)
def test_exclusion_cannot_become_inclusion(items: dict[bytes, bytes], key: bytes, value: bytes) -> None:
    store, root = tree(items)
    if key in items:
        return
    proof = prove(store, root, key, items.get)
    assert not verify_proof(dataclasses.replace(proof, value=value), root)
    assert not verify_proof(dataclasses.replace(proof, value=value, other_path=None, other_value_hash=None), root)


FIELDS = ("key", "value", "siblings", "bitmap", "other_path", "other_value_hash", "root")


@settings(max_examples=500)
@given(
    st.dictionaries(keys, st.binary(min_size=1, max_size=8), min_size=1, max_size=40),
    keys,
    st.booleans(),
    st.sampled_from(FIELDS),
    st.data(),
)
def test_any_flipped_bit_is_caught(
    items: dict[bytes, bytes], probe: bytes, present: bool, field: str, data: st.DataObject
) -> None:
    store, root = tree(items)
    key = data.draw(st.sampled_from(sorted(items))) if present else probe
    proof = prove(store, root, key, items.get)
    mutated, checked_root = proof, root
    if field == "root":
        checked_root = flip(root, data.draw(st.integers(0, 255)))
    elif field == "siblings":
        if not proof.siblings:
            return
        index = data.draw(st.integers(0, len(proof.siblings) - 1))
        sibling = flip(proof.siblings[index], data.draw(st.integers(0, 255)))
        mutated = dataclasses.replace(proof, siblings=(*proof.siblings[:index], sibling, *proof.siblings[index + 1 :]))
    else:
        original = getattr(proof, field)
        if not original:
            return  # None, or an empty key: nothing to flip
        bit = data.draw(st.integers(0, 8 * len(original) - 1))
        changes: dict[str, Any] = {field: flip(original, bit)}
        mutated = dataclasses.replace(proof, **changes)
    if not verify_proof(mutated, checked_root):
        return
    # Only one tampering can still verify: a flipped key whose exclusion proof also covers the new key
    # (the slot it proves empty, or the other leaf it found, is on the new key's path too). The proof's
    # claim must then still be true.
    assert field == "key" and proof.value is None, f"tampered {field} still verifies"
    assert mutated.key not in items


def test_flipped_key_of_exclusion_fails_when_the_slot_is_deep() -> None:
    items = {i.to_bytes(2, "big"): b"v" for i in range(2000)}
    store, root = tree(items)
    proof = prove(store, root, b"absent", items.get)
    assert proof.value is None and proof.depth >= 8
    flipped = [dataclasses.replace(proof, key=flip(proof.key, bit)) for bit in range(48)]
    caught = sum(not verify_proof(mutated, root) for mutated in flipped)
    assert caught >= 46  # a flipped key lands in the same slot with probability 2**-depth


def test_empty_tree_proves_every_key_absent() -> None:
    store = DictNodeStore()
    proof = prove(store, EMPTY, b"anything", lambda _key: None)
    assert proof == MerkleProof(b"anything", None, (), bytes(32), 0, None, None)
    assert verify_proof(proof, EMPTY)
    assert not verify_proof(proof, b"\x01" * 32)


def test_single_leaf_tree() -> None:
    store, root = tree({b"k": b"v"})
    inclusion = prove(store, root, b"k", {b"k": b"v"}.get)
    assert inclusion.depth == 0 and inclusion.siblings == ()
    assert verify_proof(inclusion, root)
    exclusion = prove(store, root, b"other", {b"k": b"v"}.get)
    assert exclusion.other_path == key_path(b"k") and exclusion.depth == 0
    assert verify_proof(exclusion, root)


@settings(max_examples=200)
@given(st.dictionaries(clustered_paths(), values, max_size=40), st.lists(clustered_paths(), max_size=8))
def test_proofs_on_long_shared_prefixes(leaves: dict[bytes, bytes], probes: list[bytes]) -> None:
    """Crafted paths (no key hashes to them): checked through the path-level verifier."""
    result = build_tree_hashed({p: value_hash(v) for p, v in leaves.items()})
    store = DictNodeStore(result.new_nodes)
    for path in [*leaves, *probes]:
        found = witness(store, result.root, path)
        assert found.depth <= 256
        proof = proof_from_witness(b"", found, leaves.get(path))
        assert _root_for_path(proof, path) == result.root
        assert (proof.value is not None) == (path in leaves)
        if path in leaves:
            other = b"x" + leaves[path]
            assert _root_for_path(dataclasses.replace(proof, value=other), path) != result.root


def test_deepest_leaves_at_256() -> None:
    base = bytes(31) + b"\x00"
    twin = bytes(31) + b"\x01"
    far = b"\x80" + bytes(31)
    leaves = {base: value_hash(b"a"), twin: value_hash(b"b"), far: value_hash(b"c")}
    result = build_tree_hashed(leaves)
    store = DictNodeStore(result.new_nodes)
    found = witness(store, result.root, base)
    assert found.depth == 256
    proof = proof_from_witness(b"", found, b"a")
    assert proof.depth == 256 and len(proof.siblings) == 2
    assert _root_for_path(proof, base) == result.root
    assert _root_for_path(dataclasses.replace(proof, value=None), base) != result.root
    with pytest.raises(ValueMismatch):
        proof_from_witness(b"", found, b"b")


def malformed(proof: MerkleProof, root: bytes) -> list[tuple[MerkleProof, bytes]]:
    r = dataclasses.replace
    anything = cast(Any, None)
    path = key_path(proof.key)
    cases = [
        r(proof, depth=-1),
        r(proof, depth=257),
        r(proof, depth=cast(Any, True)),
        r(proof, depth=cast(Any, "1")),
        r(proof, depth=proof.depth + 1),
        r(proof, bitmap=proof.bitmap[:31]),
        r(proof, bitmap=cast(Any, list(proof.bitmap))),
        r(proof, siblings=(*proof.siblings, b"\x05" * 32)),
        r(proof, siblings=proof.siblings[1:]),
        r(proof, siblings=(EMPTY, *proof.siblings[1:])),
        r(proof, siblings=(proof.siblings[0][:31], *proof.siblings[1:])),
        r(proof, siblings=cast(Any, list(proof.siblings))),
        r(proof, siblings=cast(Any, (anything, *proof.siblings[1:]))),
        r(proof, key=cast(Any, "text")),
        r(proof, value=cast(Any, "text")),
        r(proof, other_path=path, other_value_hash=b"\x01" * 32),
        r(proof, other_path=path[:31]),
        r(proof, other_value_hash=b"\x01" * 32),
        r(proof, value=b"v", other_path=b"\x01" * 32),
        r(proof, bitmap=bytes(31) + b"\x01"),
    ]
    return [(case, root) for case in cases] + [(proof, root[:31]), (proof, cast(Any, None))]


def test_malformed_proofs_are_rejected_without_raising() -> None:
    items = {i.to_bytes(2, "big"): b"v%d" % i for i in range(300)}
    store, root = tree(items)
    inclusion = prove(store, root, b"\x00\x07", items.get)
    exclusion = prove(store, root, b"absent", items.get)
    assert verify_proof(inclusion, root) and verify_proof(exclusion, root)
    for proof in (inclusion, exclusion):
        for case, checked_root in malformed(proof, root):
            assert verify_proof(case, checked_root) is False, case
    assert verify_proof(cast(Any, None), root) is False
    assert proof_root(cast(Any, "not a proof")) is None
