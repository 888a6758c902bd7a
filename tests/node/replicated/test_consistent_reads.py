"""Consistent reads over three members and etcd (docs/replication.md, "Read consistency").

A member is held behind by stopping its store writer process (SIGSTOP): every block it applies is committed
by that process, so its applied height stays where it was while its main process keeps answering reads.
On such a member:
- a read with `chain-min-height` of a block the leader just committed refuses at the deadline
  (HEIGHT_NOT_REACHED), and once the writer runs again waits and answers the new state;
- a default read answers the member's own (older) state, and says so in `chain-height`;
- a linearizable read never answers older than a write already completed elsewhere: it learns the log's
  height from etcd first (its ReadIndex), so it waits, or refuses at the deadline;
- with etcd gone, a linearizable read refuses CONSISTENCY_UNAVAILABLE (the module's last test).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import grpc
import pytest

from chain.v1 import block_pb2
from node.sdk.rpc import reason_of
from tests.fixtures.actors import RemoteActor
from tests.fixtures.etcdproc import EtcdCluster
from tests.fixtures.nodeproc import NodeProcess
from tests.fixtures.replicaset import ReplicaSet, funded_actors, leader_index, status, wait_height
from tests.node.replicated.held import LINEARIZABLE, Later, get, held_behind, refused


@dataclass
class Cluster:
    etcd: EtcdCluster
    nodes: ReplicaSet
    actor: RemoteActor

    @property
    def leader(self) -> NodeProcess:
        return self.nodes.nodes[leader_index(self.nodes)]

    @property
    def follower(self) -> NodeProcess:
        leader = leader_index(self.nodes)
        return self.nodes.nodes[(leader + 1) % len(self.nodes.nodes)]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    work = tmp_path_factory.mktemp("consistent")
    etcd = EtcdCluster(work / "etcd", 1).start()
    nodes = ReplicaSet(work, etcd).start(3)
    try:
        leader = nodes.nodes[leader_index(nodes)]
        with leader.client(timeout=30) as c:
            actor = funded_actors(c, nodes.authority(), 1)[0]
        yield Cluster(etcd, nodes, actor)
    finally:
        nodes.stop()
        etcd.stop()


def _write(cluster: Cluster, n: int) -> block_pb2.CommittedMessage:
    """A write completed on the leader (its GetMessage shows it)."""
    with cluster.leader.client(timeout=30) as c:
        return c.commit(cluster.actor.b.follow(n.to_bytes(20, "big")))[0]


def test_min_height_on_a_member_held_behind_refuses_then_waits_for_the_block(cluster: Cluster) -> None:
    behind = cluster.follower
    with held_behind(behind):
        written = _write(cluster, 1)
        assert status(behind).block_height < written.block_number  # held behind the write
        wanted = (("chain-min-height", str(written.block_number)),)
        err = refused(behind, written, wanted)
        assert (err.code(), reason_of(err)) == (grpc.StatusCode.UNAVAILABLE, "HEIGHT_NOT_REACHED"), err.details()
        waiting = Later(behind, written, wanted)  # waits for the block's commit
    assert waiting.result() >= written.block_number


def test_a_linearizable_read_never_answers_older_than_a_completed_write(cluster: Cluster) -> None:
    behind = cluster.follower
    with held_behind(behind):
        written = _write(cluster, 2)  # completed: the leader's GetMessage shows it
        err = refused(behind, written, ())  # the default read answers the member's own state: not there yet
        assert reason_of(err) == "NOT_FOUND"
        err = refused(behind, written, LINEARIZABLE)  # never NOT_FOUND: it knows the log is past its state
        assert (err.code(), reason_of(err)) == (grpc.StatusCode.UNAVAILABLE, "HEIGHT_NOT_REACHED"), err.details()
        waiting = Later(behind, written, LINEARIZABLE)
    assert waiting.result() >= written.block_number


def test_linearizable_reads_on_every_member_follow_the_writes(cluster: Cluster) -> None:
    for n in range(3, 8):
        written = _write(cluster, n)
        for node in cluster.nodes.nodes:
            assert get(node, written, LINEARIZABLE, 30) >= written.block_number
    wait_height(cluster.nodes.nodes, written.block_number)


def test_without_etcd_a_linearizable_read_refuses(cluster: Cluster) -> None:
    """Last in the module: etcd is stopped, then started again for the cluster's orderly stop."""
    written = _write(cluster, 100)
    wait_height(cluster.nodes.nodes, written.block_number)
    follower = cluster.follower
    cluster.etcd.kill(0)
    try:
        err = refused(follower, written, LINEARIZABLE)
        assert (err.code(), reason_of(err)) == (grpc.StatusCode.UNAVAILABLE, "CONSISTENCY_UNAVAILABLE"), err.details()
        assert get(follower, written, (), 10) >= written.block_number  # the default read still answers
    finally:
        cluster.etcd.restart(0)
