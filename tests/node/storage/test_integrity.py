"""Store identity and integrity on real LMDB files: the file walk before mapping, the start-up content
checks, and the read-time hash checks (the process-level refusals are in tests/node/server)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from node.block import header_hash
from node.chain import Chain
from node.errors import DataCorrupted, StoreRefused
from node.storage import chainlog, schema
from node.storage.identity import IDENTITY_FILE, read_identity_file
from node.storage.integrity import check_store
from node.storage.lmdb_file import LmdbFileDamaged, check_file, read_meta, walk
from tests.fixtures.stores import closed_store, raw_put


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return closed_store(tmp_path / "chain")


def test_genesis_writes_the_identity_and_it_is_checked(store: Path) -> None:
    identity = read_identity_file(store)
    assert identity is not None and identity.network == "devnet"
    assert check_store(store) == identity


def test_every_reachable_page_overwritten_is_found_before_mapping(store: Path) -> None:
    data = store / "data.mdb"
    meta = read_meta(data)
    pristine = data.read_bytes()
    reachable = [p for p, hit in enumerate(walk(data, meta).seen) if hit] + [0, 1]
    rng = random.Random(7)
    for page in reachable:
        damaged = bytearray(pristine)
        damaged[page * meta.page_size : (page + 1) * meta.page_size] = rng.randbytes(meta.page_size)
        data.write_bytes(bytes(damaged))
        with pytest.raises(LmdbFileDamaged):
            check_file(data)


def test_truncation_is_found_from_the_meta_pages(store: Path) -> None:
    data = store / "data.mdb"
    size = data.stat().st_size
    with open(data, "r+b") as f:
        f.truncate(size - read_meta(data).page_size)
    with pytest.raises(LmdbFileDamaged, match="truncated"):
        read_meta(data)


def test_a_broken_parent_link_below_the_head_is_refused(store: Path) -> None:
    chain = Chain.open(store)
    head = chain.height
    with chain.read() as (view, _):
        raw = view.get(schema.block_key(head - 1)) or b""
    chain.close()
    below = chainlog.block_shell(raw)
    below.header.timestamp_ms += 1  # a self-consistent block that is not the one the head links to
    below.hash = header_hash(below.header)
    raw_put(store, b"state", schema.block_key(head - 1), raw[:9] + chainlog.encode(below))
    with pytest.raises(StoreRefused, match=f"block {head} does not link to block {head - 1}"):
        Chain.open(store)


def _node_keys(chain: Chain) -> tuple[bytes, bytes, bytes, bytes]:
    """The head's root and its left child, and where each is stored in the `nodes` database."""
    root = bytes(chain.head().header.state_root)
    with chain.read() as (view, nodes):
        at = view.get(schema.tree_root_key(root)) or b""
        stored = nodes.get(root) or b""
        child, child_at = stored[1:33], stored[65:73]  # the left child, and where the root says it is
        return root, schema.tree_node_key(at, root), child, schema.tree_node_key(child_at, child)


def test_a_missing_head_root_node_is_refused(store: Path) -> None:
    chain = Chain.open(store)
    _, root_key, _, _ = _node_keys(chain)
    chain.close()
    raw_put(store, b"nodes", root_key, None)
    with pytest.raises(StoreRefused, match=r"state root \w+ is missing from the tree"):
        Chain.open(store)


def test_a_tree_node_that_does_not_hash_to_its_name_latches_data_corrupted(store: Path) -> None:
    chain = Chain.open(store)
    _, _, child, child_key = _node_keys(chain)  # the root's left child
    chain.close()
    raw_put(store, b"nodes", child_key, b"\x01" + bytes(64))
    chain = Chain.open(store)  # the start-up check reads the root only
    root = bytes(chain.head().header.state_root)
    try:
        with pytest.raises(DataCorrupted, match="does not hash to its name"), chain.read() as (_, nodes):
            nodes.get(child, (nodes.get(root) or b"")[65:73])  # where its parent says it is
        assert chain.store.fault.problem is not None
        with pytest.raises(DataCorrupted), chain.read() as (view, _):  # every later read too
            view.get(schema.block_key(0))
    finally:
        chain.close()


def test_a_store_without_identity_is_adopted(store: Path) -> None:
    raw_put(store, b"state", schema.meta_key(schema.META_IDENTITY), None)
    (store / IDENTITY_FILE).unlink()
    chain = Chain.open(store)
    chain.close()
    assert read_identity_file(store) == check_store(store)


def test_a_store_of_another_format_version_is_refused(store: Path) -> None:
    identity = check_store(store)
    newer = json.dumps({**identity.to_json(), "format_version": 4}).encode()
    raw_put(store, b"state", schema.meta_key(schema.META_IDENTITY), newer)
    with pytest.raises(StoreRefused, match="store format version 4, this node reads 1, 2, 3"):
        Chain.open(store)


def test_an_identity_record_that_disagrees_with_block_0_is_refused(store: Path) -> None:
    identity = check_store(store)
    other = json.dumps({**identity.to_json(), "genesis_hash": "00" * 32}).encode()
    raw_put(store, b"state", schema.meta_key(schema.META_IDENTITY), other)
    with pytest.raises(StoreRefused, match="disagrees with block 0"):
        Chain.open(store)
