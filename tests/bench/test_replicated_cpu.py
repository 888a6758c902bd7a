"""bench/bench_replicated.py counts a node's whole process tree: the CPU a store writer child spends on a
block is in the node's figure (it was left out while the bench read the main processes alone)."""

from __future__ import annotations

import os

from bench.bench_replicated import node_cpu, total_cpu
from bench.procstat import tree_cpu_delta
from node.storage.writer import WriterProcess


def test_a_nodes_cpu_includes_its_writer_child(writer: WriterProcess) -> None:
    me, pid = os.getpid(), writer.pid
    assert pid is not None
    block: dict[bytes, bytes | None] = {os.urandom(20): os.urandom(100) for _ in range(50_000)}
    before, own = node_cpu([me]), total_cpu([me])
    writer.commit(block, {})
    after, own_after = node_cpu([me]), total_cpu([me])
    assert pid in before and pid in after
    child = after[pid] - before[pid]
    assert child > 0.0  # the child wrote 50,000 records
    assert tree_cpu_delta(before, after) >= (own_after - own) + child
