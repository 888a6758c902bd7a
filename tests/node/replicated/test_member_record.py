"""A member writes its height record to etcd when it changes, not every maintenance tick.

`member/<id>` (applied height and address, attached to the lease) is read only by the leader's compaction,
which never compacts above a live member's applied height. It used to be put every second whether or not
anything changed: on an idle three-member cluster, three raft proposals a second, most of what etcd did. Now
an idle member writes nothing, a new height is put on the next tick, and the record is put again once a
compaction interval, so one lost some other way (deleted by hand here, or an etcd restored from a backup) is
back before long.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path

from node.server.ordering.etcd import rpc_pb2
from node.server.ordering.etcd.client import EtcdClient, op_delete
from node.server.ordering.etcd.log import Keys
from tests.fixtures.actors import new_account
from tests.fixtures.etcdproc import EtcdCluster
from tests.fixtures.replicaset import ReplicaSet, commit_retrying, status
from tests.fixtures.statesync import wait_leader

KEY = Keys(b"/chain-node/").member("n0")
REFRESH = 6.0  # --etcd-compact-interval: the record is put again this often even when unchanged


def read(etcd: EtcdCluster) -> tuple[int, dict[str, object] | None]:
    """etcd's store revision (it moves with every write) and the member's record."""

    async def run() -> tuple[int, dict[str, object] | None]:
        client = EtcdClient(etcd.endpoints)
        try:
            request = rpc_pb2.RangeRequest(key=KEY)
            response = await client.call("range", lambda e: e.kv.Range(request, timeout=5))
            doc = json.loads(response.kvs[0].value) if response.kvs else None
            return int(response.header.revision), doc
        finally:
            await client.close()

    return asyncio.run(run())


def delete(etcd: EtcdCluster) -> None:
    async def run() -> None:
        client = EtcdClient(etcd.endpoints)
        try:
            await client.txn([], [op_delete(KEY)])
        finally:
            await client.close()

    asyncio.run(run())


def record_shows(etcd: EtcdCluster, height: int, timeout: float) -> int:
    """Wait until the record says `height`; the store revision then (taken right after the put landed)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        revision, doc = read(etcd)
        if doc is not None and doc["applied"] == height:
            return revision
        time.sleep(0.05)
    raise AssertionError(f"the member record did not say height {height} within {timeout} s: {read(etcd)}")


def test_an_idle_member_writes_nothing_and_a_new_height_or_a_lost_record_is_put(
    tmp_path: Path, etcd1: EtcdCluster
) -> None:
    args = ("--empty-block-interval", "600", "--etcd-compact-interval", str(REFRESH))  # no empty blocks
    nodes = ReplicaSet(tmp_path, etcd1, *args).start(1)
    try:
        node = nodes.nodes[0]
        wait_leader(node)
        with node.client(timeout=30) as c:
            actor = new_account(c, nodes.authority())
            commit_retrying(c, actor.b.follow(os.urandom(20)))
            height = status(node).applied_height
            since = record_shows(etcd1, height, timeout=5)  # a new height is put on the next tick
            time.sleep(REFRESH / 2)  # three maintenance ticks, well before the refresh is due
            assert read(etcd1)[0] == since, "an idle member wrote to etcd"
            commit_retrying(c, actor.b.follow(os.urandom(20)))
            record_shows(etcd1, status(node).applied_height, timeout=5)
            delete(etcd1)
            assert read(etcd1)[1] is None
            record_shows(etcd1, status(node).applied_height, timeout=REFRESH + 3)  # put again within the interval
    finally:
        nodes.stop()
