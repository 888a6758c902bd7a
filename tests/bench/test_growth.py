"""bench/bench_growth.py's readings: the store writer's CPU and page writes are told apart from the main
process's (real /proc, a real writer child), and the store's pages are read beside the writer that has the
store open."""

from __future__ import annotations

import os
from pathlib import Path

from bench.bench_growth import per_role, read_tree, role, store_size
from node.storage.writer import WriterProcess


def records(count: int, size: int) -> dict[bytes, bytes | None]:
    return {os.urandom(20): os.urandom(size) for _ in range(count)}


def test_the_writer_child_and_its_page_writes_are_attributed_to_it(writer: WriterProcess) -> None:
    me = os.getpid()
    assert writer.pid is not None and role(writer.pid, me) == "writer"
    block = records(50_000, 100)
    before = read_tree(me)
    writer.commit(block, {})
    after = read_tree(me)
    cpu, written = per_role(before, after, me)  # while the child runs: a process gone has no role
    assert written["wchar"] > 5_000_000  # ~6 MB of records went through the writer's page writes
    assert cpu["writer"] > 0.0


def test_store_size_reads_the_pages_of_a_store_the_writer_has_open(tmp_path: Path, writer: WriterProcess) -> None:
    writer.commit(records(2_000, 100), {os.urandom(32): b"n" * 65 for _ in range(300)}, 1)
    size = store_size(tmp_path)
    assert size.entries == {"state": 2_001, "nodes": 300, "stale": 0}  # and the fixture's first record
    assert size.pages["state"] > size.pages["nodes"] > 0
    assert size.file_bytes >= 4096 * sum(size.pages.values())
