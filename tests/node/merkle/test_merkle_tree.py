"""The root is a pure function of the (key, value) set: checked against the reference model."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from node.merkle import (
    EMPTY,
    DictNodeStore,
    build_tree,
    build_tree_hashed,
    get,
    get_hashed,
    key_path,
    update,
    update_hashed,
    value_hash,
)
from tests.node.merkle.merkle_model import (
    check_shape,
    clustered_leaves,
    clustered_paths,
    hashed,
    key_values,
    reference_root,
)


def apply_batches(
    store: DictNodeStore, root: bytes, batches: list[dict[bytes, bytes | None]], *, hashed_api: bool = False
) -> bytes:
    for batch in batches:
        result = update_hashed(store, root, batch) if hashed_api else update(store, root, batch)
        store.put_nodes(result.new_nodes)
        root = result.root
    return root


def test_empty_tree() -> None:
    store = DictNodeStore()
    assert update(store, EMPTY, {}).root == EMPTY
    assert update(store, EMPTY, {b"absent": None}).root == EMPTY
    assert build_tree({}).root == EMPTY
    assert get(store, EMPTY, b"k") is None


def test_single_leaf_is_the_root() -> None:
    result = update(DictNodeStore(), EMPTY, {b"k": b"v"})
    assert result.root == reference_root(hashed({b"k": b"v"}))
    assert len(result.new_nodes) == 1


@given(key_values)
def test_bulk_build_matches_reference(items: dict[bytes, bytes]) -> None:
    result = build_tree(items)
    assert result.root == reference_root(hashed(items))
    store = DictNodeStore(result.new_nodes)
    assert check_shape(store, result.root) == hashed(items)
    for key, value in items.items():
        assert get(store, result.root, key) == value_hash(value)


@settings(max_examples=200)
@given(key_values, st.data())
def test_root_independent_of_order_and_batching(items: dict[bytes, bytes], data: st.DataObject) -> None:
    keys = data.draw(st.permutations(sorted(items)))
    cuts = sorted(data.draw(st.lists(st.integers(0, len(keys)), max_size=5)))
    bounds = [0, *cuts, len(keys)]
    batches: list[dict[bytes, bytes | None]] = [{k: items[k] for k in keys[a:b]} for a, b in itertools.pairwise(bounds)]
    store = DictNodeStore()
    root = apply_batches(store, EMPTY, batches)
    assert root == reference_root(hashed(items)) == build_tree(items).root
    assert check_shape(store, root) == hashed(items)


@settings(max_examples=200)
@given(key_values, key_values, st.data())
def test_deletions_and_overwrites_recompress(
    first: dict[bytes, bytes], second: dict[bytes, bytes], data: st.DataObject
) -> None:
    store = DictNodeStore()
    root = apply_batches(store, EMPTY, [dict(first)])
    doomed = data.draw(st.lists(st.sampled_from(sorted(first)), unique=True) if first else st.just([]))
    absent = data.draw(st.lists(st.binary(min_size=7, max_size=7), max_size=3))  # longer than any key
    changes: dict[bytes, bytes | None] = {k: None for k in [*doomed, *absent]}
    changes.update(second)
    expected = {k: v for k, v in first.items() if k not in changes}
    expected.update(second)
    split = data.draw(st.integers(0, len(changes)))
    ordered = list(changes.items())
    root = apply_batches(store, root, [dict(ordered[:split]), dict(ordered[split:])])
    assert root == reference_root(hashed(expected))
    assert check_shape(store, root) == hashed(expected)
    for key in changes:
        assert get(store, root, key) == (value_hash(expected[key]) if key in expected else None)


@settings(max_examples=200)
@given(clustered_leaves, st.data())
def test_long_shared_prefixes_and_chains(leaves: dict[bytes, bytes], data: st.DataObject) -> None:
    """Paths that share up to 255 bits: chain nodes, leaves at depth 256, deletions that lift far."""
    assert build_tree_hashed(leaves).root == reference_root(leaves)
    store = DictNodeStore()
    paths = data.draw(st.permutations(sorted(leaves)))
    half = len(paths) // 2
    batches: list[dict[bytes, bytes | None]] = [
        {p: leaves[p] for p in paths[:half]},
        {p: leaves[p] for p in paths[half:]},
    ]
    root = apply_batches(store, EMPTY, batches, hashed_api=True)
    assert root == reference_root(leaves)
    doomed = data.draw(st.lists(clustered_paths(), unique=True))
    remaining = {p: v for p, v in leaves.items() if p not in doomed}
    root = apply_batches(store, root, [dict.fromkeys(doomed)], hashed_api=True)
    assert root == reference_root(remaining)
    assert check_shape(store, root) == remaining
    for path in doomed:
        assert get_hashed(store, root, path) is None


@given(key_values, st.data())
def test_no_op_changes_emit_nothing(items: dict[bytes, bytes], data: st.DataObject) -> None:
    built = build_tree(items)
    store = DictNodeStore(built.new_nodes)
    same = data.draw(st.lists(st.sampled_from(sorted(items))) if items else st.just([]))
    changes: dict[bytes, bytes | None] = {k: items[k] for k in same}
    changes.update({b"absent-" + k: None for k in data.draw(st.lists(st.binary(max_size=3)))})
    result = update(store, built.root, changes)
    assert result.root == built.root
    assert result.new_nodes == {}


@given(key_values, key_values)
def test_old_roots_stay_readable(first: dict[bytes, bytes], second: dict[bytes, bytes]) -> None:
    store = DictNodeStore()
    old = apply_batches(store, EMPTY, [dict(first)])
    apply_batches(store, old, [{**dict.fromkeys(first), **second}])
    assert check_shape(store, old) == hashed(first)
    for key, value in first.items():
        assert get(store, old, key) == value_hash(value)


def test_delete_everything_gives_empty() -> None:
    items = {bytes([i]): bytes([i, i]) for i in range(50)}
    store = DictNodeStore()
    root = apply_batches(store, EMPTY, [dict(items)])
    assert apply_batches(store, root, [dict.fromkeys(items)]) == EMPTY
    assert key_path(b"") != EMPTY
