"""Disaster recovery of a replicated network (docs/operations.md, "Disaster recovery: every volume lost"):
every node volume and etcd's data are gone, an off-cluster backup (a real S3-API server, moto) is what is
left. The backup is restored onto member 0's new, empty volume and the network restarts on a new, empty etcd:
member 0 orders on (the log starts after its store's head, as in "Scale 1 -> 3"), a snapshot of a block in
the new log is taken, and two members with empty volumes join it by state sync. Everything the backup held is
the same chain on every member, and writes go on."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from chain.v1 import rpc_pb2
from tests.fixtures.actors import new_account
from tests.fixtures.backupcli import backup
from tests.fixtures.etcdproc import EtcdCluster
from tests.fixtures.motoproc import MotoProcess, serving_bucket
from tests.fixtures.replicaset import (
    ReplicaSet,
    assert_same_chain,
    blocks,
    commit_retrying,
    leader_index,
    status,
    wait_height,
)

BUCKET = "chain-backups"


@pytest.fixture
def moto(tmp_path: Path) -> Iterator[MotoProcess]:
    with serving_bucket(tmp_path / "moto", BUCKET) as server:
        yield server


def snapshot_of(nodes: ReplicaSet, index: int) -> int:
    with nodes.nodes[index].client(timeout=10) as c:
        assert c.admin is not None
        return int(c.admin.CreateSnapshot(rpc_pb2.CreateSnapshotRequest()).snapshot.block_number)


def test_a_backup_restarts_a_replicated_network_on_a_new_empty_etcd(
    tmp_path: Path, etcd1: EtcdCluster, moto: MotoProcess
) -> None:
    url = f"s3://{BUCKET}/prod"
    old = ReplicaSet(tmp_path / "old", etcd1).start(3)
    try:
        lead = leader_index(old)
        with old.nodes[lead].client(timeout=10) as c:
            actor = new_account(c, old.authority())
            for i in range(3):
                commit_retrying(c, actor.b.project_create(f"before-the-loss-{i}"))
        snapshot_of(old, lead)
        made = backup(moto, "create", "--node", old.nodes[lead].internal_target, "--url", url)
        assert made.code == 0, made.stderr
        height = int(made.doc["height"])
        backed_up = blocks(old.nodes[lead], height)
        assert backed_up[-1].header.state_root.hex() == made.doc["state_root"]
    finally:
        old.stop()
    etcd1.stop()
    shutil.rmtree(tmp_path / "old")  # every node volume lost; etcd's data dir is never used again

    new_etcd = EtcdCluster(tmp_path / "etcd-new", 1).start()
    nodes = ReplicaSet(tmp_path / "new", new_etcd)
    try:
        restored = backup(
            moto, "restore", "--from", url, "--network", "devnet", "--data-dir", str(tmp_path / "new" / "n0")
        )
        assert restored.code == 0, restored.stderr
        assert int(restored.doc["height"]) == height
        nodes.start(1)  # member 0 on the restored store, alone on the new etcd
        assert status(nodes.nodes[0]).block_height >= height
        with nodes.nodes[0].client(timeout=10) as c:
            commit_retrying(c, actor.b.project_create("after-the-restore"))
        # a snapshot of a block in the new log: the only kind a joining member can start from
        assert snapshot_of(nodes, 0) > height
        nodes.add()
        nodes.add()
        with nodes.nodes[2].client(timeout=10) as c:  # a member that joined empty: writes reach the leader
            commit_retrying(c, actor.b.project_create("from-a-joined-member"))
        top = max(status(n).block_height for n in nodes.nodes)
        wait_height(nodes.nodes, top)
        chain = assert_same_chain(nodes.nodes, top)  # the joined members hold the whole history too
        assert [b.hash for b in chain[:height]] == [b.hash for b in backed_up]  # what the backup held, unchanged
        assert sorted(status(n).role for n in nodes.nodes) == ["follower", "follower", "leader"]
        with nodes.nodes[1].client(timeout=10) as c:
            names = {
                p.name for p in c.stub.ListProjects(rpc_pb2.ListProjectsRequest(owner_address=actor.address)).projects
            }
        assert {"before-the-loss-0", "before-the-loss-2", "after-the-restore", "from-a-joined-member"} <= names
    finally:
        nodes.stop()
        new_etcd.stop()
