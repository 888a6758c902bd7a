"""A batched update creates exactly the nodes the new root needs, hashing each one once."""

from __future__ import annotations

import importlib
from collections.abc import Iterator

import pytest
from blake3 import blake3
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import node.merkle.build
import node.merkle.codec
from node.merkle import EMPTY, DictNodeStore, build_tree, update
from tests.node.merkle.merkle_model import key_values, reachable


class CountingBlake3:
    """Stands in for the blake3 constructor and counts the hashes taken."""

    def __init__(self) -> None:
        self.real = blake3
        self.calls = 0

    def __call__(self, data: bytes) -> object:
        self.calls += 1
        return self.real(data)


@pytest.fixture
def counter(monkeypatch: pytest.MonkeyPatch) -> Iterator[CountingBlake3]:
    counting = CountingBlake3()
    monkeypatch.setattr(node.merkle.codec, "blake3", counting)
    monkeypatch.setattr(node.merkle.build, "blake3", counting)
    # the module, not the `update` function the package exports under the same name
    monkeypatch.setattr(importlib.import_module("node.merkle.update"), "blake3", counting)
    yield counting


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(key_values, key_values, st.data())
def test_update_emits_each_new_node_once(
    counter: CountingBlake3, first: dict[bytes, bytes], second: dict[bytes, bytes], data: st.DataObject
) -> None:
    base = build_tree(first)
    store = DictNodeStore(base.new_nodes)
    doomed = data.draw(st.lists(st.sampled_from(sorted(first))) if first else st.just([]))
    changes: dict[bytes, bytes | None] = {**dict.fromkeys(doomed), **second}
    counter.calls = 0
    result = update(store, base.root, changes)
    # The new nodes are exactly those the new root reaches and the old root did not...
    store.put_nodes(result.new_nodes)
    assert set(result.new_nodes) == reachable(store, result.root) - reachable(store, base.root)
    # ...and each was hashed once: besides them, only keys and values are hashed.
    values = sum(1 for v in changes.values() if v is not None)
    assert counter.calls == len(changes) + values + len(result.new_nodes)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(key_values)
def test_bulk_build_hashes_each_node_once(counter: CountingBlake3, items: dict[bytes, bytes]) -> None:
    counter.calls = 0
    result = build_tree(items)
    assert counter.calls == 2 * len(items) + len(result.new_nodes)
    assert set(result.new_nodes) == reachable(DictNodeStore(result.new_nodes), result.root)


def test_shared_path_nodes_are_emitted_once_per_block() -> None:
    items = {i.to_bytes(4, "big"): b"v" for i in range(2000)}
    base = build_tree(items)
    store = DictNodeStore(base.new_nodes)
    block: dict[bytes, bytes | None] = {i.to_bytes(4, "big"): b"w" for i in range(0, 2000, 2)}
    result = update(store, base.root, block)
    store.put_nodes(result.new_nodes)
    fresh = reachable(store, result.root) - reachable(store, base.root)
    assert set(result.new_nodes) == fresh
    # 1,000 changed leaves; the internal nodes above them are shared, so far fewer than 1,000 * depth.
    assert len(result.new_nodes) < 1000 * 6
    assert result.root != EMPTY
