"""`ReadNodes`: the tree nodes reads fetched and checked, kept across reads and heads (node/merkle/store.py)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from blake3 import blake3

from node.errors import DataCorrupted
from node.merkle import EMPTY, key_path, prove, update, witness
from node.merkle.codec import encode_internal, encode_leaf
from node.merkle.store import DictNodeStore, ReadNodes
from node.storage import schema
from node.storage.lmdb_store import LmdbStore
from node.storage.tree_layout import root_record


class Counting:
    """A node store that counts its reads."""

    def __init__(self, nodes: dict[bytes, bytes]) -> None:
        self.store = DictNodeStore(nodes)
        self.reads = 0

    def get(self, node_hash: bytes, at: bytes | None = None) -> bytes | None:
        self.reads += 1
        return self.store.get(node_hash)


def test_proofs_through_the_memo_equal_the_stores_under_every_head(tmp_path: Path) -> None:
    """One memo, small enough to evict often, shared by reads of every root as blocks commit: each walk (of
    present and absent keys, under old and new heads) and each proof under the head equals the one read
    from the store alone."""
    rnd = random.Random(11)
    store = LmdbStore(tmp_path / "s", sync=False)
    memo = ReadNodes(capacity=64)
    model: dict[bytes, bytes] = {}
    roots: list[bytes] = []
    root = EMPTY
    keys = [rnd.randbytes(rnd.randint(1, 4)) for _ in range(400)]
    try:
        for number in range(1, 11):
            changes: dict[bytes, bytes | None] = {}
            for key in rnd.sample(keys, 60):
                changes[key] = None if model and rnd.random() < 0.2 else rnd.randbytes(6)
            with store.read() as (_, nodes):
                result = update(nodes, root, changes, here=schema.u64(number), root_at=nodes.root_location(root))
            store.commit(root_record(result), result.new_nodes, number)
            root = result.root
            roots.append(root)
            for key, value in changes.items():
                if value is None:
                    model.pop(key, None)
                else:
                    model[key] = value
            with store.read() as (_, nodes):
                kept = memo.over(nodes)
                for old in rnd.sample(roots, min(3, len(roots))):
                    for key in rnd.sample(keys, 40):
                        path = key_path(key)
                        assert witness(kept, old, path) == witness(nodes, old, path)
                for key in rnd.sample(sorted(model), 20):
                    assert prove(kept, root, key, model.get) == prove(nodes, root, key, model.get)
            assert 0 < len(memo) <= memo.capacity
    finally:
        store.close()


def test_a_kept_node_is_answered_from_memory() -> None:
    leaf = encode_leaf(bytes(32), bytes(32))
    name = blake3(leaf).digest()
    store = Counting({name: leaf})
    memo = ReadNodes()
    first, second = memo.over(store), memo.over(store)  # two reads (two transactions), one memo
    assert first.get(name) == leaf and store.reads == 1
    assert second.get(name) == leaf and store.reads == 1
    assert second.get(b"\x07" * 32) is None and store.reads == 2
    assert len(memo) == 1  # an absent node is not kept


def test_a_node_the_store_refuses_is_never_kept(tmp_path: Path) -> None:
    """The store checks each node against its hash; a node that fails raises through the memo, is not
    kept, and fails again on the next read."""
    good = encode_internal(b"\x01" * 32, b"\x02" * 32)
    name = blake3(good).digest()
    store = LmdbStore(tmp_path / "s", sync=False)
    memo = ReadNodes()
    try:
        # stored under the hash of other bytes, as the root of block 1
        store.commit({schema.tree_root_key(name): schema.u64(1)}, {name: good[:-1] + b"\x03"}, 1)
        for _ in range(2):
            with store.read() as (_, nodes), pytest.raises(DataCorrupted, match="does not hash to its name"):
                memo.over(nodes).get(name)
        assert len(memo) == 0
    finally:
        store.close()


def test_a_full_memo_drops_its_oldest_eighth() -> None:
    nodes = {bytes([i]) * 32: bytes([i]) for i in range(20)}
    memo = ReadNodes(capacity=16)
    kept = memo.over(DictNodeStore(nodes))
    for name in nodes:
        kept.get(name)
    assert len(memo) <= 16
    store = Counting(nodes)
    again = memo.over(store)
    assert again.get(bytes([19]) * 32) == bytes([19]) and store.reads == 0  # the newest stays
    assert again.get(bytes([0]) * 32) == bytes([0]) and store.reads == 1  # the oldest left first
