"""What the state tree's node keys cost the store writer, for three layouts of the same nodes.

    python -m bench.bench_tree_layout [--blocks 150] [--keys 1200] [--updates 0.2] [--walks 2000]

Tree nodes stored under their hashes land at random places of a B-tree: once the tree has more pages than
a block has nodes, each new node dirties a page of its own, and LMDB writes every dirty page whole
(docs/performance.md, "As the store grows"). The node stores them by creating block (store format 2,
node/storage/tree_layout.py).
This bench builds one tree with the node's own `merkle.update`, block after block (`--keys` changed keys
each, `--updates` of them overwrites of keys set before), and writes each block's new nodes into three
LMDB environments, one write transaction per block, fsynced as the node's are:

- `hash`: key = the node's hash (store format 1);
- `position`: key = the node's place in the tree (the first min(depth, 16) bits of its path, 2 bytes),
  then its hash: the nodes a path creates share a key range;
- `block`: key = the number of the block that created the node (8 bytes, big-endian), then its hash,
  appended (`MDB_APPEND`); an internal node is stored with the block numbers of its two children (16
  bytes more), which is how a reader would find them.

Five times over the run it prints, per layout, over the blocks since the last line: what the write
transactions handed the kernel per changed key (`wchar` of this process, /proc/self/io), the process's
CPU per changed key in them (`time.process_time`: the B-tree inserts, the page writes, the fsync), and
the pages the database uses. After the last block, `--walks` root-to-leaf walks of random present keys in
each layout (one LMDB get per node, the way an update or a proof reads): CPU µs per walk.

It is printed, not a row of the goals table.
"""

from __future__ import annotations

import argparse
import os
import random
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import lmdb

from node.merkle import update
from node.merkle.codec import EMPTY, NODE_LEN, Leaf, Node, decode, key_path
from node.merkle.store import DictNodeStore

LAYOUTS = ("hash", "position", "block")
POSITION_BITS = 16
LOC = 8  # bytes of a block number in a `block` key
NO_CHILD = bytes(LOC)


def position(depth: int, prefix: int) -> bytes:
    """The `position` layout's key prefix: the first min(depth, 16) bits of the node's path, left-aligned."""
    bits = min(depth, POSITION_BITS)
    return ((prefix >> (depth - bits)) << (POSITION_BITS - bits)).to_bytes(2, "big")


class Placed(NamedTuple):
    """A node where the new root reaches it: a node the block created, or an older child of one."""

    node: bytes
    encoded: bytes
    loaded: Node
    depth: int
    prefix: int  # the first `depth` bits of its path
    new: bool


def placed(root: bytes, new: dict[bytes, bytes], old: DictNodeStore) -> Iterator[Placed]:
    """Each node the block created and each older child of one, found by walking down from the new root
    through the new nodes (older ones are read from `old`)."""
    stack = [(root, 0, 0)]
    while stack:
        node, depth, prefix = stack.pop()
        created = node in new
        encoded = new[node] if created else old.get(node)
        loaded = None if encoded is None else decode(encoded)
        if encoded is None or loaded is None:
            raise LookupError(f"node {node.hex()[:16]} at depth {depth} is not a stored node")
        yield Placed(node, encoded, loaded, depth, prefix, created)
        if created and not isinstance(loaded, Leaf):  # below an older node nothing is new
            for bit, child in enumerate(loaded):
                if child != EMPTY:
                    stack.append((child, depth + 1, (prefix << 1) | bit))


@dataclass
class Tally:
    """One layout's environment and what its commits cost since the last report."""

    env: lmdb.Environment
    written: int = 0
    cpu: float = 0.0
    keys: int = 0

    def commit(self, items: dict[bytes, bytes], *, append: bool) -> None:
        before, started = wchar(), time.process_time()
        with self.env.begin(write=True) as txn:
            txn.cursor().putmulti(sorted(items.items()), overwrite=False, append=append)
        self.cpu += time.process_time() - started
        self.written += wchar() - before

    def pages(self) -> int:
        stat = self.env.stat()
        return int(stat["branch_pages"] + stat["leaf_pages"] + stat["overflow_pages"])

    def line(self) -> str:
        keys = max(self.keys, 1)
        out = f"{self.written / keys / 1e3:.1f} KB / {self.cpu / keys * 1e6:.1f} µs / {self.pages():,}"
        self.written, self.cpu, self.keys = 0, 0.0, 0
        return out


def wchar() -> int:
    """Bytes this process has handed the kernel to write so far (/proc/self/io)."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("wchar:"):
            return int(line.split()[1])
    raise RuntimeError("/proc/self/io has no wchar")


@dataclass
class Tree:
    """The tree being grown, and where each node went in the `block` layout."""

    nodes: DictNodeStore = field(default_factory=DictNodeStore)
    root: bytes = EMPTY
    created: dict[bytes, bytes] = field(default_factory=dict)  # hash -> block number (LOC bytes)
    leaf_at: dict[bytes, bytes] = field(default_factory=dict)  # leaf hash -> its `position` key now
    keys: list[bytes] = field(default_factory=list)

    def block(self, number: int, changes: dict[bytes, bytes]) -> dict[str, dict[bytes, bytes]]:
        """Apply one block's changes; each layout's key -> stored bytes for the nodes it created."""
        result = update(self.nodes, self.root, changes)
        self.nodes.put_nodes(result.new_nodes)
        self.root = result.root
        loc = number.to_bytes(LOC, "big")
        for node in result.new_nodes:
            self.created.setdefault(node, loc)
        out: dict[str, dict[bytes, bytes]] = {name: {} for name in LAYOUTS}
        for at in placed(result.root, result.new_nodes, self.nodes):
            key = position(at.depth, at.prefix) + at.node
            if at.new:
                out["hash"][at.node] = at.encoded
                out["block"][loc + at.node] = at.encoded + self.child_locs(at.loaded)
            if not isinstance(at.loaded, Leaf):
                if at.new:
                    out["position"][key] = at.encoded
            # a leaf's place moves when a new key lands beside it (deeper) or its neighbour goes (higher):
            # the `position` layout stores it again under its new place, the others need not
            elif self.leaf_at.get(at.node) != key:
                self.leaf_at[at.node] = key
                out["position"][key] = at.encoded
        return out

    def child_locs(self, loaded: Node) -> bytes:
        if isinstance(loaded, Leaf):
            return b""
        return b"".join(NO_CHILD if c == EMPTY else self.created[c] for c in loaded)


def reader(layout: str, txn: Any) -> Callable[[bytes, int, int, bytes], bytes | None]:
    """`get(hash, depth, prefix, loc)` for `walk`: how a reader finds a node in each layout."""
    if layout == "hash":
        return lambda h, d, p, loc: txn.get(h)
    if layout == "position":
        return lambda h, d, p, loc: txn.get(position(d, p) + h)
    return lambda h, d, p, loc: txn.get(loc + h)


def walk(get: Callable[[bytes, int, int, bytes], bytes | None], root: bytes, root_loc: bytes, path: bytes) -> int:
    """Walk from the root to the leaf of `path` through `get(hash, depth, prefix, loc)`; the nodes read."""
    bits = int.from_bytes(path, "big")
    node, loc, depth, prefix, read = root, root_loc, 0, 0, 0
    while node != EMPTY:
        stored = get(node, depth, prefix, loc)
        if stored is None:
            raise LookupError(f"node {node.hex()[:16]} missing at depth {depth}")
        read += 1
        loaded = decode(stored[:NODE_LEN])
        if loaded is None or isinstance(loaded, Leaf):
            return read
        bit = (bits >> (255 - depth)) & 1
        node = loaded[bit]
        loc = stored[NODE_LEN + LOC * bit : NODE_LEN + LOC * (bit + 1)]
        depth, prefix = depth + 1, (prefix << 1) | bit
    return read


def walks(tallies: dict[str, Tally], tree: Tree, count: int) -> dict[str, float]:
    """CPU µs per root-to-leaf walk of a random present key, in each layout (one read transaction each)."""
    paths = [key_path(k) for k in random.Random(7).sample(tree.keys, min(count, len(tree.keys)))]
    root_loc = tree.created.get(tree.root, NO_CHILD)
    out: dict[str, float] = {}
    for name, tally in tallies.items():
        with tally.env.begin() as txn:
            get = reader(name, txn)
            started = time.process_time()
            for path in paths:
                walk(get, tree.root, root_loc, path)
            out[name] = (time.process_time() - started) / max(len(paths), 1) * 1e6
    return out


def run(
    directory: Path, blocks: int, keys: int, updates: float, walk_count: int, report: int
) -> tuple[Tree, dict[str, float]]:
    """Grow the tree and print the per-interval lines; the tree, and the walks' CPU per layout at the end."""
    tallies = {name: Tally(lmdb.open(str(directory / name), map_size=1 << 36, sync=True)) for name in LAYOUTS}
    tree = Tree()
    rng = random.Random(1)
    try:
        for number in range(1, blocks + 1):
            changes: dict[bytes, bytes] = {}
            before = len(tree.keys)  # the keys earlier blocks set: the ones this block may overwrite
            for i in range(keys):
                if before and i < keys * updates:
                    key = tree.keys[rng.randrange(before)]
                else:
                    key = rng.randbytes(20)
                    tree.keys.append(key)
                changes[key] = os.urandom(40)
            for name, items in tree.block(number, changes).items():
                tallies[name].commit(items, append=name == "block")
                tallies[name].keys += len(changes)
            if number % report == 0 or number == blocks:
                cells = " | ".join(tallies[name].line() for name in LAYOUTS)
                print(f"| {number} | {len(tree.keys):,} | {cells} |", flush=True)
        return tree, walks(tallies, tree, walk_count)
    finally:
        for tally in tallies.values():
            tally.env.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--blocks", type=int, default=150)
    parser.add_argument("--keys", type=int, default=1200, help="changed keys per block")
    parser.add_argument("--updates", type=float, default=0.2, help="share of a block's keys that were set before")
    parser.add_argument("--walks", type=int, default=2000)
    ns = parser.parse_args()
    print(
        f"\n### Tree-node layouts: {ns.blocks} blocks of {ns.keys:,} changed keys ({ns.updates:.0%} overwrites)\n\n"
        "Per layout, over the blocks since the line before: bytes written per changed key / "
        "CPU per changed key / pages in use.\n\n"
        "| block | keys in the tree | hash | position | block |\n|---:|---:|---|---|---|",
        flush=True,
    )
    with tempfile.TemporaryDirectory() as d:
        _tree, cost = run(Path(d), ns.blocks, ns.keys, ns.updates, ns.walks, max(1, ns.blocks // 5))
    print(
        "\nroot-to-leaf walk of a present key, CPU µs: "
        + ", ".join(f"{name} {cost[name]:.1f}" for name in LAYOUTS)
        + f" ({ns.walks:,} walks, one LMDB get per node)"
    )


if __name__ == "__main__":
    main()
