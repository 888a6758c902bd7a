"""Commit pruning is part of the state transition: every member prunes the same commits. Two members that
apply the leader's write sets, one that executes every block again (`--verify-blocks full`) and a `--follow`
read replica, real processes on a real etcd: a project pushed past the commit limit (the shipped 10,000)
prunes exactly its abandoned commits, and all four hold the same block hash and state root at every height
and answer the same for the pruned and the kept commits."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest

from chain.v1 import rpc_pb2
from node import constants as C
from tests.fixtures.etcdproc import EtcdCluster
from tests.fixtures.nodeproc import NodeProcess
from tests.fixtures.replicaset import ENV, ReplicaSet, assert_same_chain, funded_actors, status, wait_height
from tests.harness import commit_line


def test_members_and_a_replica_prune_the_same_commits(tmp_path: Path) -> None:
    etcd = EtcdCluster(tmp_path / "etcd", 1).start()
    nodes = ReplicaSet(tmp_path, etcd).start(2)
    replica: NodeProcess | None = None
    try:
        nodes.add("--verify-blocks", "full")
        with nodes.nodes[0].client() as c:
            actor = funded_actors(c, nodes.authority(), 1)[0]
            snap = c.admin.CreateSnapshot(rpc_pb2.CreateSnapshotRequest()).snapshot  # type: ignore[union-attr]
        replica = NodeProcess(
            tmp_path / "replica", "--verify-workers", "0",
            "--restore", str(nodes.nodes[0].data_dir / "snapshots" / snap.name),
            "--follow", nodes.nodes[0].internal_target, env=ENV,
        ).start(120)  # fmt: skip
        per = C.MAX_COMMITS_PER_BUNDLE
        abandoned = commit_line(10**6, per)  # no ref ever reaches these
        main = commit_line(0, C.MAX_COMMITS_PER_PROJECT)
        with nodes.nodes[1].client(timeout=60) as c:  # a follower: it forwards to the leader
            created = c.commit(actor.b.project_create("big"))[0]
            pid = bytes(created.message.hash)
            c.commit(actor.b.commit_bundle(pid, abandoned))
            for start in range(0, len(main), per):  # each bundle descends from the last: it protects the line
                c.commit(actor.b.commit_bundle(pid, main[start : start + per]))
            c.commit(actor.b.ref_update(pid, b"refs/heads/main", main[-1].hash, 1))
        everyone = [*nodes.nodes, replica]
        height = max(status(n).block_height for n in nodes.nodes)
        wait_height(everyone, height)
        assert_same_chain(everyone, height)
        for node in everyone:
            with node.client() as c:
                project = c.stub.GetProject(rpc_pb2.GetProjectRequest(project_id=pid)).project
                assert project.commit_count == C.MAX_COMMITS_PER_PROJECT
                kept = c.stub.GetCommit(rpc_pb2.GetCommitRequest(project_id=pid, commit_hash=main[0].hash)).commit
                assert kept.sequence == per + 1  # after the abandoned line's 1,000
                for gone in (abandoned[0], abandoned[-1]):
                    with pytest.raises(grpc.RpcError) as info:
                        c.stub.GetCommit(rpc_pb2.GetCommitRequest(project_id=pid, commit_hash=gone.hash))
                    assert info.value.code() == grpc.StatusCode.NOT_FOUND
    finally:
        if replica is not None:
            replica.stop()
        nodes.stop()
        etcd.stop()
