"""Empty-disk members start from the newest snapshot; the log is compacted below it; big blocks are split."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

from chain.v1 import rpc_pb2
from node.server.ordering.etcd.client import EtcdClient
from node.server.ordering.etcd.log import MANIFEST, BlockLog, Keys, Tail
from tests.fixtures.etcdproc import EtcdCluster
from tests.fixtures.replicaset import ReplicaSet, assert_same_chain, funded_actors, status, wait_height


def read_tail(etcd: EtcdCluster) -> Tail:
    async def run() -> Tail:
        client = EtcdClient(etcd.endpoints)
        try:
            return await BlockLog(client, Keys(b"/chain-node/")).tail(0, 1000)
        finally:
            await client.close()

    return asyncio.run(run())


def test_empty_disk_member_restores_newest_snapshot(tmp_path: Path, etcd1: EtcdCluster) -> None:
    shared = tmp_path / "snapshots"  # e.g. a shared volume
    extra = ("--etcd-part-bytes", "4096", "--etcd-compact-interval", "1", "--snapshot-dir", str(shared))
    nodes = ReplicaSet(tmp_path, etcd1, *extra, block_interval=0.2).start(3)
    try:
        with nodes.nodes[0].client() as c:
            actor = funded_actors(c, nodes.authority(), 1)[0]
            c.commit(*[actor.b.follow(os.urandom(20)) for _ in range(60)])  # one block over 4 KiB: split
            assert any(value.startswith(MANIFEST) for _, value in read_tail(etcd1).entries)
            snap = c.admin.CreateSnapshot(rpc_pb2.CreateSnapshotRequest()).snapshot  # type: ignore[union-attr]
            c.commit(actor.b.project_create("after-snapshot"))
        deadline = time.monotonic() + 20
        while (tail := read_tail(etcd1)).first < snap.block_number:
            assert time.monotonic() < deadline, f"log not compacted below {snap.block_number}: {tail.first}"
            time.sleep(0.3)
        assert tail.first == snap.block_number  # never above the newest snapshot
        newcomer = nodes.add(data_dir=tmp_path / "empty")
        assert any("restored the newest snapshot" in line for line in newcomer.stderr_lines)
        height = max(status(n).block_height for n in nodes.nodes)
        wait_height(nodes.nodes, height)
        chain = assert_same_chain(nodes.nodes[:3], height)
        assert_same_chain([nodes.nodes[0], newcomer], height)
        assert any(len(b.SerializeToString()) > 4096 for b in chain)
    finally:
        nodes.stop()
