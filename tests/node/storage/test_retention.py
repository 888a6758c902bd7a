"""Stale tree nodes collected by the block that made them stale (node/storage/retention.py): the retained
roots stay whole, nothing else stays, a root that is not kept is a typed error, and a collection killed
mid-transaction loses nothing."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from node import merkle
from node.errors import StatePruned
from node.merkle.codec import EMPTY, INTERNAL_TAG, LEAF_TAG, UNPLACED, child_locations
from node.storage import schema
from node.storage.lmdb_store import LmdbNodeView, LmdbStore
from node.storage.retention import ALL, StateHistory

INTERNAL, LEAF = INTERNAL_TAG[0], LEAF_TAG[0]


@dataclass
class Grown:
    """A store grown block by block, with the root and the key -> value contents after each block."""

    store: LmdbStore
    history: StateHistory
    roots: list[bytes] = field(default_factory=lambda: [EMPTY])
    contents: list[dict[bytes, bytes]] = field(default_factory=lambda: [{}])

    @property
    def head(self) -> int:
        return len(self.roots) - 1

    def block(self, changes: dict[bytes, bytes | None], *, prune: bool = True, batch: int = 1 << 30) -> None:
        number = self.head + 1
        root = self.roots[-1]
        with self.store.read() as (view, nodes):
            root_at = view.get(schema.tree_root_key(root)) or UNPLACED
            result = merkle.update(nodes, root, changes, here=schema.u64(number), root_at=root_at)
        writes: dict[bytes, bytes | None] = {}
        if result.root_at is not None:
            writes[schema.tree_root_key(result.root)] = result.root_at
        self.store.commit(writes, result.new_nodes, number)
        self.roots.append(result.root)
        contents = dict(self.contents[-1])
        for key, value in changes.items():
            if value is None:
                contents.pop(key, None)
            else:
                contents[key] = value
        self.contents.append(contents)
        horizon = self.history.horizon(number)
        if prune and horizon is not None:
            self.store.prune(horizon, batch)

    def retained(self) -> range:
        return range(self.head if self.history.archive else max(0, self.head - self.history.blocks + 1), self.head + 1)


def reachable(nodes: LmdbNodeView, root: bytes) -> set[bytes]:
    """The `nodes` database keys (location + hash) of every node under `root`, each read and checked."""
    if root == EMPTY:
        return set()
    at = nodes.root_location(root)
    found: set[bytes] = set()
    stack = [(root, at)]
    while stack:
        ref, where = stack.pop()
        raw = nodes.get(ref, where)
        assert raw is not None, f"node {ref.hex()[:16]} under a retained root is missing"
        found.add(where + ref)
        if raw[0] == INTERNAL:
            left_at, right_at = child_locations(raw)
            for child, child_at in ((raw[1:33], left_at), (raw[33:65], right_at)):
                if child != EMPTY:
                    stack.append((child, child_at))
    return found


def stored_keys(store: LmdbStore) -> set[bytes]:
    return set(store.tree_node_keys())


def random_changes(rng: random.Random, live: dict[bytes, bytes], count: int) -> dict[bytes, bytes | None]:
    changes: dict[bytes, bytes | None] = {}
    keys = list(live)
    for _ in range(count):
        roll = rng.random()
        if keys and roll < 0.2:
            changes[rng.choice(keys)] = None  # a delete
        elif keys and roll < 0.5:
            changes[rng.choice(keys)] = rng.randbytes(12)  # an overwrite
        else:
            changes[b"\x01" + rng.randbytes(20)] = rng.randbytes(12)  # a new key
    return changes


def grow(path: Path, history: StateHistory, blocks: int, seed: int, per_block: int = 40) -> Grown:
    rng = random.Random(seed)
    g = Grown(LmdbStore(path, sync=False), history)
    for _ in range(blocks):
        g.block(random_changes(rng, g.contents[-1], per_block))
    return g


def assert_retained_roots_whole(g: Grown) -> set[bytes]:
    """Every node under each retained root is there, its leaves are the contents, its proofs verify: the
    union of their nodes' keys."""
    with g.store.read() as (_, nodes):
        wanted: set[bytes] = set()
        for number in g.retained():
            root = g.roots[number]
            under = reachable(nodes, root)
            leaves = sum(1 for key in under if key[8:] and _is_leaf(nodes, key))
            assert leaves == len(g.contents[number]), f"block {number}: leaves"
            for key, value in list(g.contents[number].items())[:20]:
                proof = merkle.prove(nodes, root, key, g.contents[number].get)
                assert proof.value == value and merkle.verify_proof(proof, root)
            wanted |= under
    return wanted


def assert_retained_whole_and_nothing_else(g: Grown) -> None:
    wanted = assert_retained_roots_whole(g)
    assert stored_keys(g.store) == wanted  # every stale node is gone, every retained one is there


def _is_leaf(nodes: LmdbNodeView, key: bytes) -> bool:
    raw = nodes.get(key[8:], key[:8])
    return raw is not None and raw[0] == LEAF


@pytest.mark.parametrize("history", [1, 3, 8])
def test_the_retained_roots_are_whole_and_every_other_node_is_collected(tmp_path: Path, history: int) -> None:
    g = grow(tmp_path / "s", StateHistory(history), blocks=30, seed=history)
    assert_retained_whole_and_nothing_else(g)
    # the index holds only what the retained roots still name (entries after the horizon)
    horizon = g.history.horizon(g.head)
    assert horizon is not None
    sinces = {int.from_bytes(k[:8], "big") for k in g.store.stale_index()}
    assert all(since > horizon for since in sinces)
    assert bool(sinces) == (history > 1)  # with one tree kept, everything the head replaced is gone at once
    g.store.close()


def test_an_archive_keeps_every_root_and_indexes_what_it_could_collect(tmp_path: Path) -> None:
    g = grow(tmp_path / "s", StateHistory(ALL), blocks=12, seed=7)
    stale = g.store.stale_count()
    assert stale > 0
    with g.store.read() as (_, nodes):
        for root in g.roots:
            reachable(nodes, root)  # every root since genesis is whole
    # the same store later run with a finite history catches up in one collection
    g.history = StateHistory(2)
    assert g.store.prune(g.head - 1, 1 << 30) == stale - _entries_after(g.store, g.head - 1)
    assert_retained_whole_and_nothing_else(g)
    g.store.close()


def _entries_after(store: LmdbStore, horizon: int) -> int:
    return sum(1 for k in store.stale_index() if int.from_bytes(k[:8], "big") > horizon)


def test_a_small_batch_works_a_backlog_off_over_several_blocks(tmp_path: Path) -> None:
    rng = random.Random(3)
    g = Grown(LmdbStore(tmp_path / "s", sync=False), StateHistory(2))
    for _ in range(20):  # a backlog: nothing collected yet
        g.block(random_changes(rng, g.contents[-1], 10), prune=False)
    backlog = g.store.stale_count()
    for _ in range(5):
        g.block(random_changes(rng, g.contents[-1], 2), batch=60)  # each block collects at most 60 entries
        assert_retained_roots_whole(g)
    assert g.store.stale_count() > backlog - 5 * 60
    for _ in range(80):
        g.block(random_changes(rng, g.contents[-1], 2), batch=60)
    assert_retained_whole_and_nothing_else(g)
    g.store.close()


def test_a_root_made_again_keeps_its_location_record(tmp_path: Path) -> None:
    """A key set, then deleted: the tree is back to the root of two blocks before, made again elsewhere. The
    replaced root's entry must not take the record the newer block wrote (the `record == location` guard)."""
    g = Grown(LmdbStore(tmp_path / "s", sync=False), StateHistory(2))  # block 2's entries collected after block 3
    base = {b"\x01" + bytes([i]) * 20: b"v%d" % i for i in range(8)}
    g.block(dict(base))
    g.block({b"\x01" + b"\xaa" * 20: b"x"})
    g.block({b"\x01" + b"\xaa" * 20: None})
    assert g.roots[3] == g.roots[1]
    g.block({})  # more blocks: nothing changes, the head root is still the one made again
    g.block({})
    assert_retained_whole_and_nothing_else(g)
    g.store.close()


def test_a_walk_from_a_collected_root_is_a_typed_error(tmp_path: Path) -> None:
    g = grow(tmp_path / "s", StateHistory(2), blocks=10, seed=11)
    key = next(iter(g.contents[2]))
    with g.store.read() as (_, nodes):
        with pytest.raises(StatePruned) as refused:
            merkle.prove(nodes, g.roots[2], key, g.contents[2].get)
        assert refused.value.reason.value == "STATE_PRUNED"
        head_key = next(iter(g.contents[-1]))
        assert merkle.verify_proof(merkle.prove(nodes, g.roots[-1], head_key, g.contents[-1].get), g.roots[-1])
    g.store.close()


def test_before_any_collection_a_missing_root_is_not_called_pruned(tmp_path: Path) -> None:
    g = grow(tmp_path / "s", StateHistory(ALL), blocks=3, seed=2)
    with g.store.read() as (_, nodes):
        assert nodes.get(os.urandom(32)) is None  # unknown, not "pruned": this store never collected
    g.store.close()


PRUNER = """
import sys
from node.storage.lmdb_store import LmdbStore
store = LmdbStore(sys.argv[1], sync=True)
print("open", flush=True)
store.prune(int(sys.argv[2]), 1 << 30)
print("done", flush=True)
"""


@pytest.mark.parametrize("delay", [0.0, 0.02, 0.08])
def test_a_collection_killed_mid_transaction_loses_nothing(tmp_path: Path, delay: float) -> None:
    """SIGKILL a process inside one large collection: the store is at its state before or after it, the head
    root whole either way, and the next collection finishes the work."""
    path = tmp_path / "s"
    g = grow(path, StateHistory(ALL), blocks=40, seed=5, per_block=120)
    g.store.close()
    proc = subprocess.Popen(
        [sys.executable, "-c", PRUNER, str(path), str(g.head)], stdout=subprocess.PIPE, cwd=Path.cwd()
    )
    assert proc.stdout is not None
    assert proc.stdout.readline() == b"open\n"
    time.sleep(delay)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    g.store = LmdbStore(path, sync=False)
    g.history = StateHistory(1)
    with g.store.read() as (_, nodes):
        assert len(reachable(nodes, g.roots[-1])) > 0
    g.store.prune(g.head, 1 << 30)
    assert_retained_whole_and_nothing_else(g)
    g.store.close()


def test_state_history_parses_all_and_refuses_nonsense() -> None:
    assert StateHistory.parse("all").archive and StateHistory.parse("ALL").horizon(100) is None
    assert StateHistory.parse("64").horizon(100) == 37 and StateHistory.parse("64").horizon(10) is None
    assert StateHistory.parse("1").horizon(5) == 5
    for bad in ("0", "-3", "many"):
        with pytest.raises(ValueError):
            StateHistory.parse(bad)
