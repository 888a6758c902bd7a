"""Helpers of the state-sync tests: a network with a snapshot the log was compacted past, the etcd log's
tail, and `chain-node state-sync` run as its own process."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

from chain.v1 import node_info_pb2, rpc_pb2
from node.server.ordering.etcd.client import EtcdClient
from node.server.ordering.etcd.log import BlockLog, Keys, Tail
from tests.node.replicated.cluster import ENV, ReplicaSet, funded_actors, status, wait_height
from tests.node.replicated.etcdproc import EtcdCluster
from tests.node.server.nodeproc import ROOT, NodeProcess

COMPACT = ("--etcd-compact-interval", "0.5")


def read_tail(etcd: EtcdCluster) -> Tail:
    async def run() -> Tail:
        client = EtcdClient(etcd.endpoints)
        try:
            return await BlockLog(client, Keys(b"/chain-node/")).tail(0, 1)
        finally:
            await client.close()

    return asyncio.run(run())


def fill(node: NodeProcess, follows: int, authority_node: NodeProcess | None = None) -> None:
    """Commit `follows` follow messages (a few accounts' worth of state) through `node`."""
    with node.client(timeout=30) as c:
        actors = funded_actors(c, (authority_node or node).authority(), max(1, follows // 500))
        for i in range(0, follows, 100):
            actor = actors[(i // 100) % len(actors)]
            c.commit(*[actor.b.follow(os.urandom(20)) for _ in range(100)])


def snapshot(node: NodeProcess) -> node_info_pb2.SnapshotInfo:
    with node.client(timeout=60) as c:
        return c.admin.CreateSnapshot(rpc_pb2.CreateSnapshotRequest()).snapshot  # type: ignore[union-attr]


def wait_compacted(etcd: EtcdCluster, floor: int, timeout: float = 30.0) -> Tail:
    """Wait until the log's oldest entry is at least `floor`."""
    deadline = time.monotonic() + timeout
    while (tail := read_tail(etcd)).first < floor:
        assert time.monotonic() < deadline, f"log not compacted up to {floor}: starts at {tail.first}"
        time.sleep(0.2)
    return tail


def advance(nodes: ReplicaSet, blocks: int) -> int:
    """Let the network cut `blocks` more blocks (empty ones count); the new height."""
    target = max(status(n).block_height for n in nodes.alive()) + blocks
    wait_height(nodes.alive(), target)
    return target


def state_sync_cmd(nodes: ReplicaSet, data_dir: Path, node_id: str, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "node.server.main", "state-sync", "--data-dir", str(data_dir), "--orderer", "etcd",
        "--etcd-endpoints", nodes.etcd.endpoints_flag, "--node-id", node_id, *extra,
    ]  # fmt: skip


def run_state_sync(nodes: ReplicaSet, data_dir: Path, node_id: str, *extra: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), **ENV)
    cmd = state_sync_cmd(nodes, data_dir, node_id, *extra)
    return subprocess.run(cmd, check=False, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


def start_state_sync(nodes: ReplicaSet, data_dir: Path, node_id: str, *extra: str) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), **ENV)
    cmd = state_sync_cmd(nodes, data_dir, node_id, *extra)
    return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
