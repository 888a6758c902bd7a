"""A rolling upgrade's mixed cluster, real processes on real etcd (one cluster for the module): while a member
reads only `B` log entries (the previous release; here the test hook `CHAIN_TEST_LOG_READS=B`, under which it
refuses a `W` entry as an unknown encoding, as that release does), the leader writes `B` entries and that
member keeps up; once it reads `W` again, the leader writes `W` (node/server/ordering/etcd/formats.py)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest

from node.server.ordering.etcd.client import EtcdClient, prefix_end
from node.server.ordering.etcd.formats import READS_ENV
from node.server.ordering.etcd.log import Keys
from tests.fixtures.actors import fresh
from tests.fixtures.etcdproc import EtcdCluster
from tests.fixtures.nodeproc import NodeProcess
from tests.fixtures.replicaset import ReplicaSet, leader_index, status, wait_height

KEYS = Keys(b"/chain-node/")


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ReplicaSet]:
    """Two members on a one-member etcd of their own; no empty blocks, so the log moves only on a commit."""
    work = tmp_path_factory.mktemp("formats")
    etcd = EtcdCluster(work / "etcd", 1).start()
    nodes = ReplicaSet(work, etcd, "--empty-block-interval", "600")
    try:
        nodes.start(2)
        yield nodes
    finally:
        nodes.stop()
        etcd.stop()


def kinds(etcd: EtcdCluster, after: int) -> dict[int, str]:
    """The format letter of every log entry after block `after`."""

    async def run() -> dict[int, str]:
        client = EtcdClient(etcd.endpoints)
        try:
            kvs = await client.range(KEYS.log(after + 1), prefix_end(KEYS.log_prefix))
            return {int(kv.key.rsplit(b"/", 1)[1]): kv.value[:1].decode() for kv in kvs}
        finally:
            await client.close()

    return asyncio.run(run())


def said(node: NodeProcess, text: str, since: int, timeout: float = 20.0) -> None:
    """Wait until the node logs `text` in a line after its first `since` lines."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(text in line for line in node.stderr_lines[since:]):
            return
        time.sleep(0.05)
    lines = "".join(node.stderr_lines[since:][-10:])
    raise AssertionError(f"the leader did not log {text!r} within {timeout} s ({status(node).role}): {lines}")


def commit_blocks(leader: NodeProcess, count: int) -> int:
    """Commit `count` messages one at a time through the leader; its height after."""
    with leader.client(timeout=30) as c:
        for _ in range(count):
            c.commit(fresh())
    return status(leader).block_height


def test_the_leader_writes_b_while_a_member_reads_only_b_and_w_once_it_reads_w(pair: ReplicaSet) -> None:
    lead = leader_index(pair)
    follower = 1 - lead
    leader = pair.nodes[lead]
    start = commit_blocks(leader, 1)
    assert set(kinds(pair.etcd, start - 1).values()) == {"W"}  # every member reads W: write sets go out

    seen = len(leader.stderr_lines)
    pair.nodes[follower].stop()  # replaced by a pod of the previous release
    pair.restart(follower, env={READS_ENV: "B"})
    said(leader, "writes B log entries", seen)
    height = commit_blocks(leader, 3)
    assert set(kinds(pair.etcd, start).values()) == {"B"}, "a W entry while a member reads only B"
    wait_height([pair.nodes[follower]], height, timeout=20)  # it applies every block, executing each

    seen = len(leader.stderr_lines)  # W again from the member's stop (its record goes with its lease) on
    pair.nodes[follower].stop()  # upgraded: it reads W again
    pair.restart(follower, env={})
    said(leader, "writes W log entries", seen)
    wait_height([pair.nodes[follower]], height, timeout=20)
    later = commit_blocks(leader, 1)
    assert set(kinds(pair.etcd, height).values()) == {"W"}
    wait_height([pair.nodes[follower]], later, timeout=20)
