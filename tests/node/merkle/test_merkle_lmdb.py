"""The tree on a real LMDB environment: one write transaction per block, old roots readable after reopen."""

from __future__ import annotations

import random
from pathlib import Path

import lmdb
import pytest

from node.merkle import (
    EMPTY,
    get,
    prove,
    update,
    value_hash,
    verify_proof,
)
from node.merkle.lmdb_store import LmdbNodeStore, open_lmdb_store
from tests.node.merkle.merkle_model import check_shape, hashed, reference_root


def open_env(path: Path) -> lmdb.Environment:
    return lmdb.open(str(path), map_size=1 << 26, max_dbs=2, subdir=True)


def test_blocks_through_lmdb(tmp_path: Path) -> None:
    rnd = random.Random(7)
    env = open_env(tmp_path / "db")
    nodes = env.open_db(b"merkle_nodes")
    model: dict[bytes, bytes] = {}
    roots: list[tuple[bytes, dict[bytes, bytes]]] = []
    root = EMPTY
    for block in range(12):
        changes: dict[bytes, bytes | None] = {}
        for _ in range(150):
            key = rnd.randbytes(rnd.randint(1, 3))
            changes[key] = None if rnd.random() < 0.25 else rnd.randbytes(4)
        with env.begin(write=True) as txn:
            store = LmdbNodeStore(txn, nodes)
            result = update(store, root, changes)
            written = store.put_nodes(result.new_nodes)
            assert written == len(result.new_nodes) or block > 0
        for key, value in changes.items():
            if value is None:
                model.pop(key, None)
            else:
                model[key] = value
        root = result.root
        assert root == reference_root(hashed(model))
        roots.append((root, dict(model)))
    env.close()

    env = open_env(tmp_path / "db")
    nodes = env.open_db(b"merkle_nodes")
    with open_lmdb_store(env, nodes) as store:
        for old_root, old_model in roots:
            assert check_shape(store, old_root) == hashed(old_model)
            for key, value in list(old_model.items())[:20]:
                assert get(store, old_root, key) == value_hash(value)
                assert verify_proof(prove(store, old_root, key, old_model.get), old_root)
            assert verify_proof(prove(store, old_root, b"\xff" * 8, old_model.get), old_root)
    env.close()


def test_prefixed_store_and_abort(tmp_path: Path) -> None:
    env = open_env(tmp_path / "db")
    with open_lmdb_store(env, write=True, prefix=b"\x4d") as store:
        result = update(store, EMPTY, {b"a": b"1", b"b": b"2", b"c": b"3"})
        store.put_nodes(result.new_nodes)
    with env.begin() as txn:
        assert all(txn.get(b"\x4d" + h) == data for h, data in result.new_nodes.items())
        assert txn.get(next(iter(result.new_nodes))) is None
    with pytest.raises(RuntimeError), open_lmdb_store(env, write=True, prefix=b"\x4d") as store:
        later = update(store, result.root, {b"d": b"4"})
        store.put_nodes(later.new_nodes)
        raise RuntimeError("block rejected")
    with open_lmdb_store(env, prefix=b"\x4d") as store:
        assert store.get(later.root) is None  # the aborted block left no trace
        assert get(store, result.root, b"b") == value_hash(b"2")
    env.close()
