"""A full disk under a replicated member: the leader's store refuses its blocks, so it gives up leadership and
a healthy member leads; once space returns it catches up from the log and nothing accepted is lost. Also a
lone member, and a `--follow` read replica.

Without the hand-over a leader that cannot commit keeps its lease (its keep-alives do not touch the disk) and
every member forwards writes to it: one member's full disk would stop the whole cluster's writes.
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

import grpc

from chain.v1 import rpc_pb2
from node.sdk.rpc import ChainClient, reason_of
from tests.fixtures.disk import fill
from tests.fixtures.etcdproc import EtcdCluster
from tests.fixtures.health import NOT_SERVING, SERVING, health_status, wait_health
from tests.fixtures.nodeproc import NodeProcess
from tests.fixtures.replicaset import (
    ENV,
    ReplicaSet,
    assert_same_chain,
    commit_retrying,
    funded_actors,
    leader_index,
    status,
    wait_elected_again,
    wait_height,
)


def test_a_leader_on_a_full_disk_hands_over_and_catches_up(tmp_path: Path, tmpfs: Path, etcd1: EtcdCluster) -> None:
    nodes = ReplicaSet(tmp_path, etcd1)
    try:
        nodes.add(data_dir=tmpfs / "n0")  # alone at first, so it leads; its store is on the small tmpfs
        assert leader_index(nodes) == 0
        nodes.add()
        nodes.add()
        assert leader_index(nodes) == 0
        healthy = nodes.nodes[1]
        with ChainClient(healthy.grpc_target, timeout=10) as c:
            actor = funded_actors(c, nodes.authority(), 1)[0]

            fill(tmpfs / "ballast")
            accepted: list[bytes] = []
            refusals: set[str] = set()
            new_leader = 0
            deadline = time.monotonic() + 45
            while new_leader == 0:
                assert time.monotonic() < deadline, f"the leader kept leading on a full disk (refusals {refusals})"
                try:
                    accepted.append(c.submit(actor.b.follow(os.urandom(20))))
                except grpc.RpcError as err:  # NOT_LEADER while the members elect, STORAGE_FAILED before
                    refusals.add(reason_of(err))
                with contextlib.suppress(TimeoutError):
                    new_leader = leader_index(nodes, timeout=1)
                time.sleep(0.05)
            assert accepted, "nothing was accepted while the leader's disk filled"

            after = c.commit(actor.b.follow(os.urandom(20)), timeout=30)  # writes go on without the old leader
            assert after
            stuck = nodes.nodes[0]
            assert status(stuck).role == "follower"
            assert health_status(stuck.grpc_target, "readiness") == NOT_SERVING
            assert any("gives up leadership" in line for line in stuck.stderr_lines)

            (tmpfs / "ballast").unlink()
            wait_health(stuck.grpc_target, SERVING, timeout=60, why="the member did not recover once space returned")
            for message_hash in accepted:  # every message answered "accepted" is committed, none dropped
                c.wait_committed(message_hash, timeout=60)
        height = max(status(n).block_height for n in nodes.nodes)
        wait_height(nodes.nodes, height)
        assert_same_chain(nodes.nodes, height)
    finally:
        nodes.stop()


def test_a_lone_member_on_a_full_disk_refuses_with_storage_failed_and_leads_again(
    tmp_path: Path, tmpfs: Path, etcd1: EtcdCluster
) -> None:
    """Nobody else can lead: its writes are refused with STORAGE_FAILED (not "no leader") whether it holds the
    key at that moment or not, and once space returns it leads and commits again by itself."""
    nodes = ReplicaSet(tmp_path, etcd1)
    try:
        node = nodes.add(data_dir=tmpfs / "n0")
        assert leader_index(nodes) == 0
        with ChainClient(node.grpc_target, timeout=10) as c:
            actor = funded_actors(c, nodes.authority(), 1)[0]
            fill(tmpfs / "ballast")
            accepted: list[bytes] = []
            refusal = ""
            deadline = time.monotonic() + 45
            while not refusal:
                assert time.monotonic() < deadline, "the member kept accepting on a full disk"
                try:
                    accepted.append(c.submit(actor.b.follow(os.urandom(20))))
                except grpc.RpcError as err:
                    refusal = reason_of(err)
            assert refusal == "STORAGE_FAILED"
            # With nothing else to lead it takes the key back whenever its next attempt is due (0.25 s doubling)
            # and gives it up when that attempt fails: leadership is retried as a solo node retries its block,
            # so a failure with nothing left in the log to retry (a writer lost twice while building) cannot
            # leave it out of the election for good.
            # Each retry is an election (the metric); the log says the give-up once, not at every retry.
            wait_elected_again(node, 2, why="the lone member did not try to lead again while failing")
            assert sum("gives up leadership" in line for line in node.stderr_lines) == 1
            for _ in range(10):  # over two seconds, in and out of its turns at leading: the same refusal
                try:
                    c.submit(actor.b.follow(os.urandom(20)))
                    raise AssertionError("accepted on a full disk")
                except grpc.RpcError as err:
                    assert reason_of(err) == "STORAGE_FAILED"
                time.sleep(0.2)

            (tmpfs / "ballast").unlink()
            commit_retrying(c, actor.b.follow(os.urandom(20)), timeout=60)  # it leads and commits again
            assert status(node).role == "leader"
            for message_hash in accepted:
                c.wait_committed(message_hash, timeout=30)
    finally:
        nodes.stop()


def test_a_read_replica_on_a_full_disk_stops_serving_then_catches_up(tmp_path: Path, tmpfs: Path) -> None:
    """A `--follow` replica whose disk fills cannot apply its upstream's blocks: it is not ready (clients go
    elsewhere) while it retries at the store's backoff, and once space returns it applies them, root for root."""
    upstream = NodeProcess(tmp_path / "up", "--verify-workers", "0", "--web-addr", "", env=ENV).start(120)
    replica: NodeProcess | None = None
    try:
        with upstream.client() as c:
            actor = funded_actors(c, upstream.authority(), 1)[0]
            snap = c.admin.CreateSnapshot(rpc_pb2.CreateSnapshotRequest()).snapshot  # type: ignore[union-attr]
        replica = NodeProcess(
            tmpfs / "replica", "--verify-workers", "0", "--web-addr", "",
            "--restore", str(tmp_path / "up" / "snapshots" / snap.name), "--follow", upstream.internal_target, env=ENV,
        ).start(120)  # fmt: skip
        wait_height([replica], status(upstream).block_height)
        wait_health(replica.grpc_target, SERVING, timeout=30, why="the replica did not turn ready")

        fill(tmpfs / "ballast")
        with upstream.client() as c:
            for _ in range(5):
                c.commit(*[actor.b.follow(os.urandom(20)) for _ in range(20)])
        wait_health(replica.grpc_target, NOT_SERVING, timeout=30, why="the replica stayed ready on a full disk")
        assert status(replica).block_height < status(upstream).block_height
        assert any("STORAGE FAILED" in line for line in replica.stderr_lines)

        (tmpfs / "ballast").unlink()
        height = status(upstream).block_height
        wait_height([replica], height)
        assert_same_chain([upstream, replica], height)
        wait_health(replica.grpc_target, SERVING, timeout=30, why="the replica did not turn ready again")
    finally:
        if replica is not None:
            replica.stop()
        upstream.stop()
