"""Tree nodes stored with the block that stored them (store format 2, node/storage/tree_layout.py): where each
block's nodes go, walks and proofs across them, a store of format 1 read and continued, and the refusals."""

from __future__ import annotations

import dataclasses
import os
import random
from pathlib import Path

import lmdb
import pytest

from node import merkle
from node.chain import Chain
from node.errors import InvariantBroken
from node.merkle.codec import INTERNAL_TAG, PLACED_INTERNAL_LEN
from node.merkle.update import Placed
from node.server.verify_store import Damaged, Progress, verify
from node.storage import schema
from node.storage.identity import FORMAT_VERSION, IDENTITY_FILE, StoreIdentity, read_identity_file, write_identity_file
from node.storage.tree_layout import LEGACY
from tests.fixtures.formats import placed_as, to_format_1
from tests.harness import Actor, Harness

INTERNAL = INTERNAL_TAG[0]


def follows(h: Harness, actors: list[Actor], blocks: int, per_block: int) -> list[int]:
    """Blocks of follows (each block's numbers returned)."""
    numbers = []
    for _ in range(blocks):
        out = h.commit(*[actors[i % len(actors)].b.follow(os.urandom(20)) for i in range(per_block)])
        numbers.append(int(out.block.header.number))
    return numbers


def raw_nodes(path: Path, db: bytes) -> dict[bytes, bytes]:
    env = lmdb.open(str(path), max_dbs=4, readonly=True, lock=False)
    try:
        handle = env.open_db(db, create=False)
        with env.begin(db=handle) as txn:
            return dict(txn.cursor().iternext())
    finally:
        env.close()


def public_keys(chain: Chain) -> list[bytes]:
    with chain.read() as (view, _):
        return [k for k, _ in view.scan(b"") if schema.in_tree(k)]


def assert_every_key_proves(
    chain: Chain, root: bytes, keys: list[bytes], values: dict[bytes, bytes] | None = None
) -> None:
    """A proof of each key under `root` read from the store (fresh views: no memo) verifies against it;
    `values`: the keys' values under that root (default: the store's now)."""
    with chain.read() as (view, nodes):
        for key in keys:
            proof = merkle.prove(nodes, root, key, view.get if values is None else values.get)
            assert merkle.verify_proof(proof, root), key.hex()


def values_of(chain: Chain, keys: list[bytes]) -> dict[bytes, bytes]:
    with chain.read() as (view, _):
        return {k: view.get(k) or b"" for k in keys}


def test_each_blocks_new_nodes_are_stored_under_its_number(tmp_path: Path) -> None:
    h = Harness(tmp_path / "c")
    actors = [h.actor(units=20) for _ in range(3)]
    outputs = [h.commit(*[a.b.follow(os.urandom(20)) for a in actors for _ in range(30)]) for _ in range(6)]
    assert_every_key_proves(h.chain, h.root(), public_keys(h.chain))
    for out in outputs:
        root = bytes(out.block.header.state_root)
        with h.chain.read() as (view, _):
            assert view.get(schema.tree_root_key(root)) == schema.u64(out.block.header.number)
    h.chain.close()
    stored = raw_nodes(tmp_path / "c", b"nodes")
    for out in outputs:
        number = int(out.block.header.number)
        mine = {k[8:]: v for k, v in stored.items() if k[:8] == schema.u64(number)}
        assert mine == out.tree_nodes.here()  # the block's nodes, in their stored forms, under its number
        assert all(len(v) == PLACED_INTERNAL_LEN for v in mine.values() if v[0] == INTERNAL)
    assert list(stored) == sorted(stored)  # appended: every block's keys after the one before
    assert raw_nodes(tmp_path / "c", b"tree") == {}  # nothing is written by hash any more


def test_walks_follow_locations_into_older_blocks_and_through_the_memo(tmp_path: Path) -> None:
    """An update reaches nodes stored blocks ago (read from LMDB with the memo off, or from the memo), and
    places the new nodes' references to them where they are."""
    for capacity in (0, 100_000):
        h = Harness(tmp_path / f"c{capacity}")
        h.chain.recent_nodes = merkle.store.RecentNodes(capacity)
        actors = [h.actor(units=20) for _ in range(3)]
        numbers = follows(h, actors, 5, 40)
        older = 0
        made = h.commit(actors[0].b.follow(os.urandom(20))).tree_nodes.placed
        assert made is not None  # a chain without a writer process makes the nodes here
        for stored in made.values():
            if len(stored) == PLACED_INTERNAL_LEN:
                places = {int.from_bytes(stored[65:73], "big"), int.from_bytes(stored[73:81], "big")}
                older += any(0 < p < numbers[-1] + 1 for p in places)
        assert older > 0  # one new path refers to subtrees older blocks stored
        assert_every_key_proves(h.chain, h.root(), public_keys(h.chain))


def test_a_store_of_format_1_is_read_continued_and_marked_format_2(tmp_path: Path) -> None:
    path = tmp_path / "c"
    h = Harness(path)
    actors = [h.actor(units=40) for _ in range(3)]
    follows(h, actors, 4, 30)
    old_root, old_keys = h.root(), public_keys(h.chain)
    old_values = values_of(h.chain, old_keys)
    h.chain.close()
    to_format_1(path)
    assert raw_nodes(path, b"nodes") == {}

    h.chain = Chain.open(path, h.chain.params)
    assert (read_identity_file(path) or StoreIdentity(0, "", b"")).format_version == FORMAT_VERSION  # the file
    with h.chain.read() as (view, _):
        record = StoreIdentity.decode(view.get(schema.meta_key(schema.META_IDENTITY)) or b"")
    assert record.format_version == FORMAT_VERSION  # and the record: a format-1 binary now refuses the store
    assert_every_key_proves(h.chain, old_root, old_keys)  # every node is legacy, by hash

    numbers = follows(h, actors, 3, 30)
    assert_every_key_proves(h.chain, h.root(), public_keys(h.chain))
    assert_every_key_proves(h.chain, old_root, old_keys, old_values)  # an old root still walks, by hash
    h.chain.close()
    legacy_refs = sum(
        LEGACY in (v[65:73], v[73:81]) for v in raw_nodes(path, b"nodes").values() if len(v) == PLACED_INTERNAL_LEN
    )
    assert legacy_refs > 0  # new paths refer to the untouched subtrees of the old layout

    report = verify(path, Progress(60))  # verify-store reads both layouts
    assert report.height == numbers[-1]
    reopened = Chain.open(path)
    try:
        assert_every_key_proves(reopened, bytes(reopened.head().header.state_root), public_keys(reopened))
    finally:
        reopened.close()


def test_a_block_whose_nodes_were_not_placed_is_refused_and_nothing_is_stored(tmp_path: Path) -> None:
    """The gate in Chain.commit: nodes that did not come out of a placed update (bare internal nodes, no
    children's locations) would make every node below them unreachable once stored."""
    h = Harness(tmp_path / "c")
    actors = [h.actor(units=20) for _ in range(2)]
    follows(h, actors, 2, 20)
    height, root = h.chain.height, h.root()
    msgs = [actors[0].b.follow(os.urandom(20)) for _ in range(20)]
    out = h.chain.build(h.now * 1000, msgs)
    placed = out.tree_nodes.here()
    forged = {k: v[:65] for k, v in placed.items()}  # bare nodes, made around the update
    nodes = dataclasses.replace(out.tree_nodes, placed=forged)  # type: ignore[arg-type]  # what the gate refuses
    bare = dataclasses.replace(out, tree_nodes=nodes)
    with pytest.raises(InvariantBroken, match="were not placed"):
        h.chain.commit(bare)
    assert (h.chain.height, h.root()) == (height, root)
    h.chain.commit(out)  # the same block as the update placed it
    assert h.chain.height == height + 1


def test_a_placed_update_makes_the_same_tree_and_says_where_every_child_is() -> None:
    """`update(here=...)`: the same root and nodes as a bare update; each new internal node followed by its
    children's locations (`here` for a child made now, an old child's own), the new root's location."""
    rnd = random.Random(5)
    keys = [rnd.randbytes(8) for _ in range(300)]
    base = merkle.build_tree({k: rnd.randbytes(6) for k in keys[:200]})
    store = merkle.DictNodeStore({h: placed_as(v, schema.u64(1)) for h, v in base.new_nodes.items()})
    changes: dict[bytes, bytes | None] = {k: rnd.randbytes(6) for k in keys[150:300]}
    changes |= {k: None for k in keys[:20]}
    bare = merkle.update(store, base.root, changes)
    here = schema.u64(2)
    placed = merkle.update(store, base.root, changes, here=here, root_at=schema.u64(1))
    assert placed.root == bare.root and placed.root_at == here
    assert isinstance(placed.new_nodes, Placed) and not isinstance(bare.new_nodes, Placed)
    assert {h: v[:65] for h, v in placed.new_nodes.items()} == bare.new_nodes
    old = 0
    for stored in placed.new_nodes.values():
        if stored[0] != INTERNAL:
            assert len(stored) == 65
            continue
        assert len(stored) == PLACED_INTERNAL_LEN
        for child, at in ((stored[1:33], stored[65:73]), (stored[33:65], stored[73:81])):
            if child in placed.new_nodes:
                assert at == here
            elif child != merkle.EMPTY:
                assert store.get(child) is not None and at == schema.u64(1)
                old += 1
    assert old > 0  # some new paths refer to untouched subtrees of the tree before
    with pytest.raises(ValueError, match="root's location"):
        merkle.update(store, base.root, changes, here=here)


def test_verify_store_finds_a_child_that_is_not_where_its_parent_says(tmp_path: Path) -> None:
    path = tmp_path / "c"
    h = Harness(path)
    actors = [h.actor(units=20) for _ in range(2)]
    follows(h, actors, 3, 20)
    root = h.root()
    with h.chain.read() as (view, _):
        root_at = view.get(schema.tree_root_key(root))
    h.chain.close()
    assert root_at is not None
    # the head's root: a node every walk reaches (an older node may be one no root reaches any more)
    key = schema.tree_node_key(root_at, root)
    stored = raw_nodes(path, b"nodes")[key]
    assert len(stored) == PLACED_INTERNAL_LEN
    moved = stored[:65] + schema.u64(int.from_bytes(stored[65:73], "big") + 1000) + stored[73:]
    env = lmdb.open(str(path), max_dbs=4, map_size=1 << 30)
    try:
        with env.begin(write=True, db=env.open_db(b"nodes")) as txn:
            txn.put(key, moved)  # the node still hashes to its name: only its left child's location is wrong
    finally:
        env.close()
    with pytest.raises(Damaged, match="where it is not stored"):
        verify(path, Progress(60))


def test_the_identity_file_of_a_format_1_store_is_rewritten_even_when_the_record_was_first(tmp_path: Path) -> None:
    """A crash between the record and the file leaves the record at 2 and the file at 1: the next open
    accepts it (same chain) and writes the file again."""
    path = tmp_path / "c"
    h = Harness(path)
    h.chain.close()
    identity = read_identity_file(path)
    assert identity is not None and identity.format_version == FORMAT_VERSION
    write_identity_file(path, StoreIdentity(1, identity.network, identity.genesis_hash))
    Chain.open(path).close()
    assert (path / IDENTITY_FILE).exists() and read_identity_file(path) == identity
