"""Scale 1 -> 3 (solo -> etcd), as docs/operations.md "Scale 1 -> 3" says: the solo node's store becomes
member 0 of a replicated network on a fresh etcd (the log starts after the store's head), a snapshot is taken
once member 0 orders through etcd, and two members with empty data dirs join it by state sync from that
snapshot. A snapshot from the solo era cannot serve (its block is not in the log): a member started too early
stops with the runbook's line. Nothing the solo node committed is lost or changed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from chain.v1 import rpc_pb2
from tests.fixtures.actors import new_account
from tests.fixtures.etcdproc import EtcdCluster
from tests.fixtures.nodeproc import NodeProcess
from tests.fixtures.replicaset import (
    ENV,
    ReplicaSet,
    assert_same_chain,
    blocks,
    commit_retrying,
    status,
    wait_height,
)


def test_a_solo_store_becomes_member_0_and_two_empty_members_state_sync(tmp_path: Path, etcd1: EtcdCluster) -> None:
    solo = NodeProcess(tmp_path / "n0", "--web-addr", "", "--verify-workers", "0", env=ENV).start()
    try:
        with solo.client(timeout=10) as c:
            actor = new_account(c, solo.authority())
            c.commit(*[actor.b.follow(os.urandom(20)) for _ in range(20)])
            project = c.commit(actor.b.project_create("from-the-solo-era"))[0]
            assert c.admin is not None
            c.admin.CreateSnapshot(rpc_pb2.CreateSnapshotRequest())  # solo era: of no use to a joining member
        solo_height = status(solo).block_height
        (solo_head,) = blocks(solo, solo_height, first=solo_height)
    finally:
        assert solo.stop() == 0

    nodes = ReplicaSet(tmp_path, etcd1)  # member 0's data dir is the solo node's (tmp_path / "n0")
    try:
        nodes.start(1)  # step 1: the same store, now ordering through etcd, alone
        with nodes.nodes[0].client(timeout=10) as c:
            commit_retrying(c, actor.b.project_create("first-replicated-block"))  # lists its snapshot first
        with pytest.raises(RuntimeError, match=r"block \d+ is not in the log"):
            nodes.add()  # too early: only the solo-era snapshot is served (its data dir is tried again below)
        with nodes.nodes[0].client(timeout=10) as c:  # step 2: a snapshot of a block in the log
            assert c.admin is not None
            snap = c.admin.CreateSnapshot(rpc_pb2.CreateSnapshotRequest()).snapshot
        assert snap.block_number > solo_height
        nodes.add()  # step 3: two more members on empty data dirs
        nodes.add()
        with nodes.nodes[2].client(timeout=10) as c:  # a member that joined empty: writes go to the leader
            commit_retrying(c, actor.b.project_create("after-the-move"))
            got = c.stub.GetMessage(rpc_pb2.GetMessageRequest(hash=project.message.hash)).message
            assert got.block_number == project.block_number
        height = max(status(n).block_height for n in nodes.nodes)
        assert height > solo_height
        wait_height(nodes.nodes, height)
        for n in nodes.nodes:  # the solo era is the same chain on every member
            (block,) = blocks(n, solo_height, first=solo_height)
            assert block.hash == solo_head.hash and block.header.state_root == solo_head.header.state_root
        assert_same_chain(nodes.nodes[1:], height)
        assert sorted(status(n).role for n in nodes.nodes) == ["follower", "follower", "leader"]
    finally:
        nodes.stop()
