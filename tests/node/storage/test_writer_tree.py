"""State-tree updates in the store's writer process (node/storage/writer.py `update_tree`), on LMDB on disk.

A chain with a writer process runs each block's tree update in the child, which keeps the new nodes until
the commit that names them. The blocks it builds, seals and applies must equal the blocks built in
process, byte for byte; a commit that reaches a child which lost the nodes (killed, or exited after the
disk refused the write) runs the same update again first and must give the same root; an update whose
child dies runs again in a new one; a damaged node the update reads latches the store's fault.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from chain.v1 import block_pb2
from chain.v1 import message_pb2 as pb
from node.block import block_messages
from node.chain import Chain
from node.errors import DataCorrupted, InvariantBroken, MessageRejected, StorageFailed
from node.server.write.pending import PendingBlocks
from node.state.transition import BlockOutput
from node.storage import chainlog, schema
from node.storage.writer import DIE_ENV, WriterLost, WriterProcess
from tests.fixtures.disk import fill
from tests.fixtures.procs import wait_until
from tests.fixtures.stores import follow, raw_put, replica, some_blocks
from tests.harness import Harness, recomputed_root


@pytest.fixture
def source(tmp_path: Path) -> Iterator[Harness]:
    """A chain that builds blocks in process (the reference)."""
    h = Harness(tmp_path / "source")
    yield h
    h.chain.close()


@pytest.fixture
def behind(source: Harness, tmp_path: Path) -> Iterator[Chain]:
    """A chain with a writer process that holds all of `source` but its newest block."""
    some_blocks(source, 1)
    chain = replica(source, tmp_path / "replica")
    follow(chain, source.chain, limit=source.chain.height - 1)
    yield chain
    chain.close()


def stored_block(chain: Chain, number: int) -> block_pb2.Block:
    with chain.read() as (view, _):
        block = chainlog.read_block(view, number)
    assert block is not None
    return block


def next_block(source: Harness, chain: Chain) -> block_pb2.Block:
    """The block of `source` that `chain` commits next."""
    return stored_block(source.chain, chain.height + 1)


def writer_of(chain: Chain) -> WriterProcess:
    assert chain.writer is not None
    return chain.writer


def kill_child(writer: WriterProcess) -> None:
    pid = writer.pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    assert wait_until(lambda: writer.pid is None, 10)


def test_blocks_built_sealed_and_applied_through_the_writer_equal_the_blocks_built_in_process(
    source: Harness, tmp_path: Path
) -> None:
    """Root for root and byte for byte: the update in the child is the update in process."""
    outs = some_blocks(source, 6)
    chain = replica(source, tmp_path / "replica")
    try:
        follow(chain, source.chain, limit=int(outs[0].block.header.number) - 1)
        for out in outs:
            block = out.block
            number = int(block.header.number)
            msgs = block_messages(block)
            if number % 3 == 0:  # applied, as a follower does
                mine = chain.apply(block, verify=False)
            elif number % 3 == 1:  # executed again from the messages, as the fallback build does
                mine = chain.build(int(block.header.timestamp_ms), msgs)
            else:  # admitted into open blocks and sealed, as the orderer does
                mine = seal_one(chain, msgs, int(block.header.timestamp_ms))
            assert mine.tree_nodes.placed is None and len(mine.tree_nodes) > 0  # held in the writer
            assert mine.block.SerializeToString(deterministic=True) == block.SerializeToString(deterministic=True)
            assert dict(mine.writes) == dict(out.writes)
            chain.commit(mine)
        assert len(chain.recent_nodes) == 0  # the nodes never came to this process
        assert chain.head().hash == source.chain.head().hash
        assert chain.store.entry_count() == source.chain.store.entry_count()
        assert chain.store.tree_node_count() == source.chain.store.tree_node_count()
        assert recomputed_root(chain) == bytes(chain.head().header.state_root)
        assert writer_of(chain).starts == 1
    finally:
        chain.close()


def seal_one(chain: Chain, msgs: list[pb.Message], timestamp_ms: int) -> BlockOutput:
    snapshot = chain.store.begin_read()
    try:
        pending = PendingBlocks(chain.params, snapshot.view)
        for msg in msgs:
            with contextlib.suppress(MessageRejected):
                pending.admit(msg, timestamp_ms)
        assert len(pending.blocks) == 1
        seal = pending.sealer(chain.tree_nodes(snapshot.nodes), timestamp_ms)
        assert seal is not None
        return seal()
    finally:
        snapshot.close()


def test_a_writer_killed_between_the_update_and_the_commit_commits_from_the_update_sent_again(
    source: Harness, behind: Chain
) -> None:
    """The gate: without the update sent again, the new child holds no nodes and the commit fails."""
    writer = writer_of(behind)
    out = behind.apply(next_block(source, behind), verify=False)
    kill_child(writer)
    behind.commit(out)
    assert writer.starts == 2
    assert behind.head().hash == source.chain.head().hash
    assert recomputed_root(behind) == bytes(behind.head().header.state_root)
    some_blocks(source, 1)
    follow(behind, source.chain)  # the new child's memo goes on from there
    assert behind.head().hash == source.chain.head().hash


def test_an_update_sent_again_that_gives_another_root_is_refused(source: Harness, behind: Chain) -> None:
    """The gate: the root of the update sent again is compared with the root the block holds."""
    writer = writer_of(behind)
    block = next_block(source, behind)
    other = behind.build(int(block.header.timestamp_ms), block_messages(block)[:3])
    out = behind.apply(block, verify=False)
    assert other.block.header.state_root != out.block.header.state_root
    number = int(block.header.number)
    mine, theirs = (number, bytes(out.block.header.state_root)), (number, bytes(other.block.header.state_root))
    writer._updates[mine] = writer._updates[theirs]  # as if the update sent again made another tree
    kill_child(writer)
    height = behind.height
    with pytest.raises(InvariantBroken, match=r"gave root .* again"):
        behind.commit(out)
    assert behind.height == height


def test_an_update_whose_writer_dies_runs_again_in_a_new_one(
    source: Harness, behind: Chain, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer = writer_of(behind)
    block = next_block(source, behind)
    pid = writer.pid
    assert pid is not None
    os.kill(pid, signal.SIGSTOP)  # it cannot answer; killed while the update waits for it
    threading.Timer(0.3, os.kill, (pid, signal.SIGKILL)).start()
    out = behind.apply(block, verify=False)
    assert writer.starts == 2
    behind.commit(out)
    assert behind.head().hash == source.chain.head().hash

    some_blocks(source, 1)
    writer.close()
    monkeypatch.setenv(DIE_ENV, "update")  # every child dies at its first update
    height = behind.height
    with pytest.raises(WriterLost, match="exited"):
        behind.apply(next_block(source, behind), verify=False)
    assert behind.height == height and writer.starts == 4
    monkeypatch.delenv(DIE_ENV)
    follow(behind, source.chain)
    assert behind.head().hash == source.chain.head().hash


def test_a_write_the_full_disk_refused_is_retried_from_the_update_sent_again(tmpfs: Path) -> None:
    """The child exits after a refused write (a fresh environment for the retry), so the retry sends the
    update again; the block is stored once the disk has room."""
    h = Harness(tmpfs / "chain")
    try:
        writer = h.chain.start_writer()
        alice = h.actor(units=200)
        h.now += 1
        msgs = [alice.b.account_data(pb.ACCOUNT_FIELD_BIO, f"{i:04d}" + "x" * 200) for i in range(400)]
        out = h.chain.build(h.now * 1000, msgs)
        assert out.tree_nodes.placed is None and not out.dropped  # held in the writer
        height = h.chain.height
        fill(tmpfs / "ballast")
        with pytest.raises(StorageFailed):
            h.chain.commit(out)
        assert h.chain.height == height
        (tmpfs / "ballast").unlink()
        h.chain.commit(out)
        assert h.chain.height == height + 1 and writer.starts == 2
        assert recomputed_root(h.chain) == bytes(h.chain.head().header.state_root)
    finally:
        h.chain.close()


def test_a_damaged_node_the_update_reads_latches_the_store_fault(source: Harness, behind: Chain) -> None:
    path = behind.store.path
    block = next_block(source, behind)
    root = bytes(behind.head().header.state_root)
    with behind.read() as (_, nodes):
        stored = nodes.get(root) or b""
    behind.close()
    # both children of the root, where the root says they are: every update reads at least one of them (a
    # block's few changed keys may all lie on one side)
    for child, at in ((stored[1:33], stored[65:73]), (stored[33:65], stored[73:81])):
        raw_put(path, b"nodes", schema.tree_node_key(at, child), b"\x01" + bytes(64))
    chain = Chain.open(path)
    try:
        chain.start_writer()  # a new child: nothing in its memo, it reads the nodes from the file
        with pytest.raises(DataCorrupted, match=r"corrupt|does not match|hash"):
            chain.apply(block, verify=False)
        with pytest.raises(DataCorrupted):  # latched: every later read is refused too
            chain.head()
    finally:
        chain.close()


def test_held_nodes_commit_only_through_their_writer_and_for_their_block(
    source: Harness, behind: Chain, tmp_path: Path
) -> None:
    """The gates: nodes held by a writer are refused by a chain without one, and for another block."""
    out = behind.apply(next_block(source, behind), verify=False)
    held = out.tree_nodes
    assert held.placed is None
    bare = Chain.open(tmp_path / "bare", source.chain.params)  # commits in process: no writer holds anything
    try:
        follow(bare, behind)
        with pytest.raises(InvariantBroken, match="held by no writer"):
            bare.commit(out)
    finally:
        bare.close()
    height = behind.height
    elsewhere = dataclasses.replace(out, tree_nodes=dataclasses.replace(held, block=held.block + 1))
    with pytest.raises(InvariantBroken, match=f"held for block {held.block + 1}"):
        behind.commit(elsewhere)
    assert behind.height == height
    behind.commit(out)  # the real one still commits
    assert behind.head().hash == source.chain.head().hash
