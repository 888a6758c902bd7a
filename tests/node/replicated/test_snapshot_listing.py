"""A member lists a snapshot change in etcd before the call that made it answers.

Joining members pick the snapshot to state-sync from among those live members list in etcd. The listing used
to follow a snapshot only on the member's next maintenance tick (every second), so a member scaled up right
after CreateSnapshot answered found nothing to start from. Each check below reads etcd right after the call
returned: without the listing being written before the answer, it would see the previous listing.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from chain.v1 import rpc_pb2
from node.server.ordering.etcd.client import EtcdClient
from node.server.ordering.etcd.join import served_snapshots
from node.server.ordering.etcd.log import Keys
from node.server.snapshots.sync_client import Peer
from tests.fixtures.actors import new_account
from tests.fixtures.etcdproc import EtcdCluster
from tests.fixtures.replicaset import ReplicaSet, commit_retrying
from tests.fixtures.statesync import wait_leader


def listed(etcd: EtcdCluster) -> list[Peer]:
    async def run() -> list[Peer]:
        client = EtcdClient(etcd.endpoints)
        try:
            return await served_snapshots(client, Keys(b"/chain-node/"))
        finally:
            await client.close()

    return asyncio.run(run())


def test_a_snapshot_is_listed_when_the_call_that_took_it_answers(tmp_path: Path, etcd1: EtcdCluster) -> None:
    nodes = ReplicaSet(tmp_path, etcd1).start(1)
    try:
        wait_leader(nodes.nodes[0])
        with nodes.nodes[0].client(timeout=30) as c:
            assert c.admin is not None
            actor = new_account(c, nodes.authority())
            taken = []
            for _ in range(3):  # three in a row: a maintenance tick landing in between cannot explain them all
                commit_retrying(c, actor.b.follow(os.urandom(20)))
                snap = c.admin.CreateSnapshot(rpc_pb2.CreateSnapshotRequest()).snapshot
                (peer,) = listed(etcd1)
                assert (peer.node_id, peer.name, peer.block_number) == ("n0", snap.name, snap.block_number)
                taken.append(snap)
            c.admin.DeleteSnapshot(rpc_pb2.DeleteSnapshotRequest(name=taken[-1].name))
            (peer,) = listed(etcd1)  # the deleted one is no longer offered: the newest left is
            assert peer.name == taken[-2].name
    finally:
        nodes.stop()
