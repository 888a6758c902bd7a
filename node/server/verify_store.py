"""`chain-node verify-store --data-dir DIR`: check a store offline, from the file up.

1. every check the node makes at start-up, with the page walk reaching every node of every leaf page;
2. every block: stored under its number, hashes to its hash, links to its parent, numbers 0..head;
3. every tree node: hashes to the name it is stored under, and an internal node's children are stored where
   it says they are (node/storage/tree_layout.py);
4. the state root recomputed from the leaves (every public-state record) equals the head's.

Progress goes to stderr about once a second. Exit 0 and a summary (stderr) plus a JSON document (stdout)
when sound; exit 1 with one line naming the first problem when not; exit 2 for a usage error. Run it on a
store no node has open (a copy, or with the node stopped): it reads one consistent LMDB snapshot, but a
running node keeps committing beside it.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from blake3 import blake3

from chain.v1 import block_pb2
from node.errors import DataCorrupted, StoreRefused
from node.merkle.build import build_sorted
from node.merkle.codec import EMPTY, NODE_LEN, PLACED_INTERNAL_LEN, child_locations, decode
from node.storage import chainlog, schema
from node.storage.integrity import CHECKED_KEYS, check_contents, check_files, check_record
from node.storage.lmdb_store import LmdbReadView, LmdbStore

EXIT_SOUND, EXIT_DAMAGED, EXIT_USAGE = 0, 1, 2


class Damaged(Exception):
    """The first problem found."""


class _Discard(dict[bytes, bytes]):
    """The node sink of build_sorted when only the root is wanted."""

    def __setitem__(self, key: bytes, value: bytes) -> None:
        pass


class Progress:
    def __init__(self, interval: float) -> None:
        self.interval = interval
        self._next = time.monotonic() + interval

    def tick(self, phase: str, done: int, total: int) -> None:
        now = time.monotonic()
        if now >= self._next:
            self._next = now + self.interval
            share = f" ({100 * done // total}%)" if total else ""
            print(f"verify-store: {phase}: {done}/{total}{share}", file=sys.stderr, flush=True)


@dataclass
class Report:
    height: int = 0
    blocks: int = 0
    keys: int = 0
    tree_nodes: int = 0
    state_root: str = ""
    seconds: float = 0.0
    phases: dict[str, float] = field(default_factory=dict)  # seconds per phase

    @property
    def keys_per_s(self) -> float:
        return self.keys / self.seconds if self.seconds else 0.0


def check_blocks(view: LmdbReadView, head: block_pb2.Block, progress: Progress) -> int:
    """Blocks 0..head, each under its number, hashing to its hash (check_record) and linked to its parent."""
    expected_parent = bytes(32)
    number = -1
    total = int(head.header.number) + 1
    for key, raw in view.scan(schema.blocks_prefix()):
        number += 1
        at = int.from_bytes(key[1:], "big")
        if at != number:
            raise Damaged(f"block {number} is missing (the next stored block is {at})")
        block = chainlog.block_shell(raw)
        if bytes(block.header.parent_hash) != expected_parent:
            raise Damaged(f"block {number} does not link to block {number - 1} (parent hash mismatch)")
        expected_parent = bytes(block.hash)
        progress.tick("blocks", number + 1, total)
    if number != head.header.number or expected_parent != head.hash:
        raise Damaged(f"the head record names block {head.header.number}, the last stored block is {number}")
    return number + 1


def check_tree_nodes(store: LmdbStore, progress: Progress) -> int:
    total = store.tree_node_count()
    count = 0
    with store.read() as (_view, nodes):
        for name, stored in store.tree_nodes():
            if decode(stored) is None or blake3(stored[:NODE_LEN]).digest() != name:
                raise Damaged(f"tree node {name.hex()[:16]} does not hash to its name")
            if len(stored) == PLACED_INTERNAL_LEN:
                for child, at in zip((stored[1:33], stored[33:65]), child_locations(stored), strict=True):
                    if child != EMPTY and not nodes.present(child, at):
                        raise Damaged(
                            f"tree node {name.hex()[:16]} refers to {child.hex()[:16]} at block "
                            f"{int.from_bytes(at, 'big')}, where it is not stored"
                        )
            count += 1
            if not count & 0xFFFF:
                progress.tick("tree nodes", count, total)
    return count


def recompute_root(view: LmdbReadView, progress: Progress, total: int) -> tuple[bytes, int]:
    """The state root of every public-state record, built from scratch."""
    leaves: list[tuple[bytes, bytes]] = []
    for key, value in view.scan(b""):
        if not schema.in_tree(key):
            break  # keys are ordered and public state is every key below TREE_PREFIX_LIMIT
        leaves.append((blake3(key).digest(), blake3(value).digest()))
        if not len(leaves) & 0xFFFF:
            progress.tick("state keys", len(leaves), total)
    leaves.sort()
    paths = [p for p, _ in leaves]
    root = build_sorted([int.from_bytes(p, "big") for p in paths], paths, [v for _, v in leaves], 0, out=_Discard())
    return root, len(leaves)


def verify(data_dir: Path, progress: Progress) -> Report:
    started = time.monotonic()
    report = Report()

    def phase(name: str) -> None:
        report.phases[name] = round(time.monotonic() - started - sum(report.phases.values()), 3)

    file_identity = check_files(data_dir, deep=True)
    phase("file")
    store = LmdbStore(data_dir, sync=False, check=check_record, checked=CHECKED_KEYS)
    try:
        contents = check_contents(store, file_identity)
        head = contents.head
        report.height = int(head.header.number)
        report.tree_nodes = check_tree_nodes(store, progress)
        phase("tree_nodes")
        with store.read() as (view, _nodes):
            report.blocks = check_blocks(view, head, progress)
            phase("blocks")
            root, report.keys = recompute_root(view, progress, store.entry_count())
            phase("state_root")
        if root != head.header.state_root:
            raise Damaged(
                f"the state root recomputed from {report.keys} keys is {root.hex()[:16]}, "
                f"block {report.height} says {head.header.state_root.hex()[:16]}"
            )
        report.state_root = root.hex()
    finally:
        store.close()
    report.seconds = time.monotonic() - started
    return report


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="chain-node verify-store", description="Check a chain-node store offline.")
    p.add_argument("--data-dir", type=Path, required=True, help="the store directory (holds data.mdb)")
    p.add_argument("--progress-interval", type=float, default=1.0, help="seconds between progress lines")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.getLogger("chain.store").addHandler(logging.NullHandler())  # the DAMAGED line says it once
    if not args.data_dir.is_dir():
        print(f"verify-store: {args.data_dir} is not a directory", file=sys.stderr)
        return EXIT_USAGE
    try:
        report = verify(args.data_dir, Progress(args.progress_interval))
    except StoreRefused as err:
        print(f"verify-store: DAMAGED: {err.path}: {err.problem}", file=sys.stderr)
        return EXIT_DAMAGED
    except (Damaged, DataCorrupted) as err:
        print(f"verify-store: DAMAGED: {args.data_dir}: {err}", file=sys.stderr)
        return EXIT_DAMAGED
    print(
        f"verify-store: sound: {args.data_dir}: height {report.height}, {report.blocks} blocks, "
        f"{report.keys} state keys, {report.tree_nodes} tree nodes, root {report.state_root[:16]}; "
        f"{report.seconds:.2f} s, {report.keys_per_s:,.0f} keys/s",
        file=sys.stderr,
    )
    doc = {"event": "verified", **report.__dict__, "keys_per_s": round(report.keys_per_s, 1)}
    print(json.dumps(doc), flush=True)
    return EXIT_SOUND
