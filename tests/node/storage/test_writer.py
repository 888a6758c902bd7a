"""Block commits through the store's writer process (node/storage/writer.py), on LMDB on disk.

The same blocks give the same store as commits in process; a writer killed before it answers leaves the
block stored or not, and the chain tells which from its head (counted once, or retried); a writer killed
at random moments never loses or doubles a block; the writer never outlives its parent.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from node.chain import Chain
from node.errors import StorageFailed
from node.storage.writer import DIE_ENV, WriterLost
from tests.fixtures.procs import alive, wait_until
from tests.fixtures.stores import follow, replica, some_blocks
from tests.harness import Harness, recomputed_root

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def source(tmp_path: Path) -> Iterator[Harness]:
    """A chain that builds blocks in process (the reference)."""
    h = Harness(tmp_path / "source")
    yield h
    h.chain.close()


def test_blocks_committed_by_the_writer_process_give_the_same_store(source: Harness, tmp_path: Path) -> None:
    some_blocks(source, 4)
    chain = replica(source, tmp_path / "replica")
    try:
        follow(chain, source.chain)
        assert chain.writer is not None and chain.writer.pid is not None and chain.writer.pid != os.getpid()
        assert chain.head().hash == source.chain.head().hash
        assert recomputed_root(chain) == bytes(chain.head().header.state_root)
        assert chain.store.entry_count() == source.chain.store.entry_count()
        assert chain.store.tree_node_count() == source.chain.store.tree_node_count()
    finally:
        chain.close()


@pytest.fixture
def behind(source: Harness, tmp_path: Path) -> Iterator[Chain]:
    """A replica committing through a writer process that holds all of `source` but its newest blocks."""
    chain = replica(source, tmp_path / "replica")
    follow(chain, source.chain)
    some_blocks(source, 1)
    assert chain.writer is not None and chain.writer.pid is not None
    yield chain
    chain.close()


def test_a_writer_killed_after_storing_the_block_counts_it_once(
    source: Harness, behind: Chain, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The gate: after losing the writer the chain reads its head; without that the stored block is retried."""
    assert behind.writer is not None
    behind.writer.close()  # the next commit starts a child that inherits the hook
    monkeypatch.setenv(DIE_ENV, "after")
    blocks = source.chain.height - behind.height
    follow(behind, source.chain)  # each child stores its block and dies before answering
    assert behind.head().hash == source.chain.head().hash
    monkeypatch.delenv(DIE_ENV)
    some_blocks(source, 1)
    follow(behind, source.chain)  # a new child, and the chain goes on
    assert behind.head().hash == source.chain.head().hash
    assert behind.writer.starts == 1 + blocks + 1


def test_a_writer_lost_before_storing_the_block_is_replaced_at_once(source: Harness, behind: Chain) -> None:
    """A stopped child cannot store the block it is sent; killed, it is replaced and the block committed."""
    assert behind.writer is not None and behind.writer.pid is not None
    pid = behind.writer.pid
    os.kill(pid, signal.SIGSTOP)
    threading.Timer(0.3, os.kill, (pid, signal.SIGKILL)).start()
    follow(behind, source.chain)  # no error: the second writer stores it
    assert behind.head().hash == source.chain.head().hash
    assert behind.writer.starts == 2


def test_writers_killed_twice_before_storing_the_block_fail_the_commit_and_the_retry_stores_it(
    source: Harness, behind: Chain, monkeypatch: pytest.MonkeyPatch
) -> None:
    height = behind.height
    assert behind.writer is not None
    behind.writer.close()
    monkeypatch.setenv(DIE_ENV, "before")
    with pytest.raises(WriterLost, match="exited") as lost:
        follow(behind, source.chain)
    assert isinstance(lost.value, StorageFailed)  # the orderer retries it with backoff, candidates kept
    assert behind.height == height
    monkeypatch.delenv(DIE_ENV)
    follow(behind, source.chain)
    assert behind.head().hash == source.chain.head().hash


def test_writers_killed_at_random_moments_never_lose_or_double_a_block(source: Harness, tmp_path: Path) -> None:
    """Most commits get a SIGKILL for their writer at a random moment (before, during or after the write)."""
    outs = some_blocks(source, 12)
    chain = replica(source, tmp_path / "replica")
    rng = random.Random(7)
    assert chain.writer is not None
    writer = chain.writer
    kills = failures = 0
    try:
        deadline = time.monotonic() + 120
        while chain.height < source.chain.height and time.monotonic() < deadline:
            pid = writer.pid
            timer = None
            if pid is not None and rng.random() < 0.7:
                timer = threading.Timer(rng.uniform(0.0, 0.02), kill, (pid,))
                timer.start()
                kills += 1
            try:
                follow(chain, source.chain, limit=1)
            except StorageFailed:
                failures += 1  # lost twice in a row, not stored: the same block again, as the orderer does
            if timer is not None:
                timer.join()
        assert chain.height == source.chain.height == outs[-1].block.header.number
        assert chain.head().hash == source.chain.head().hash
        assert recomputed_root(chain) == bytes(chain.head().header.state_root)
        assert kills > 5 and writer.starts > 5  # the kills did land
    finally:
        chain.close()
    reopened = Chain.open(tmp_path / "replica")
    assert reopened.head().hash == source.chain.head().hash
    reopened.close()


def kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # exited and reaped meanwhile
        os.kill(pid, signal.SIGKILL)


PARENT = """
import sys, time
from node.chain import Chain
chain = Chain.open(sys.argv[1])
writer = chain.start_writer()
print(writer.pid, flush=True)
time.sleep(60)
"""


def test_the_writer_dies_with_its_parent_even_when_it_cannot_read_its_pipe(tmp_path: Path) -> None:
    """A stopped writer never sees its input close: only the kernel's parent-death signal ends it."""
    Harness(tmp_path / "chain").chain.close()
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, str(tmp_path / "chain")], cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True
    )
    assert parent.stdout is not None
    writer = int(parent.stdout.readline())
    try:
        time.sleep(1.0)  # the child has asked for its parent-death signal (it does so first thing)
        os.kill(writer, signal.SIGSTOP)
        parent.kill()
        parent.wait()
        assert wait_until(lambda: not alive(writer), 10), "the stopped writer outlived its parent"
    finally:
        if alive(writer):
            os.kill(writer, signal.SIGKILL)
