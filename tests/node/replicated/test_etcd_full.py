"""etcd's database full (its NOSPACE alarm) under a real cluster: the members refuse writes with a typed reason
instead of accepting messages that cannot commit, keep serving reads, and commit everything they accepted once
an operator has made room (a larger quota) and disarmed the alarm."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from chain.v1 import rpc_pb2
from node.errors import REASON_CODE, RETRY_AFTER_MS, Reason, trailer
from node.sdk.rpc import ChainClient
from tests.fixtures.actors import RemoteActor
from tests.fixtures.etcdproc import EtcdCluster
from tests.fixtures.health import SERVING, health_status
from tests.fixtures.replicaset import (
    ReplicaSet,
    assert_same_chain,
    commit_retrying,
    funded_actors,
    leader_index,
    status,
    wait_height,
)
from tests.fixtures.scrape import scrape, value

QUOTA = 4 * 1024 * 1024  # a few hundred blocks of 100 follows fill it
ROOMY = ("--quota-backend-bytes", str(256 * 1024 * 1024))


@pytest.fixture
def small_etcd(tmp_path: Path) -> Iterator[EtcdCluster]:
    cluster = EtcdCluster(tmp_path / "etcd", 1, extra=("--quota-backend-bytes", str(QUOTA))).start()
    yield cluster
    cluster.stop()


def refusal(err: grpc.RpcError) -> tuple[str | None, str | None]:
    md = err.trailing_metadata()
    return trailer(md, REASON_CODE), trailer(md, RETRY_AFTER_MS)


def fill_until_refused(
    c: ChainClient, actors: list[RemoteActor], accepted: list[bytes], timeout: float = 120.0
) -> grpc.RpcError:
    """Batches of 100 follows until the node refuses one whole; the hashes it accepted go to `accepted`."""
    deadline = time.monotonic() + timeout
    i = 0
    while time.monotonic() < deadline:
        try:
            results = c.batch([actors[i % len(actors)].b.follow(os.urandom(20)) for _ in range(100)])
        except grpc.RpcError as err:
            return err
        accepted.extend(bytes(r.hash) for r in results if r.accepted)
        i += 1
    raise AssertionError("etcd never filled up")


def test_a_full_etcd_refuses_writes_typed_and_commits_everything_accepted_once_there_is_room(
    tmp_path: Path, small_etcd: EtcdCluster
) -> None:
    nodes = ReplicaSet(tmp_path, small_etcd, block_interval=0.1).start(2)
    try:
        lead = leader_index(nodes)
        leader, follower = nodes.nodes[lead], nodes.nodes[1 - lead]
        accepted: list[bytes] = []
        with leader.client(timeout=10) as c, follower.client(timeout=10) as f:
            actors = funded_actors(c, nodes.authority(), 4)
            err = fill_until_refused(c, actors, accepted)
            reason, hint = refusal(err)
            assert err.code() == grpc.StatusCode.UNAVAILABLE and reason == Reason.STORAGE_FAILED.value, err
            assert "NOSPACE" in (err.details() or "") and hint is not None and int(hint) >= 1000
            assert any("ETCD FULL" in line for line in leader.stderr_lines)
            assert value(scrape(leader.ready["metrics_port"]), "chain_etcd_no_space") == 1
            with pytest.raises(grpc.RpcError) as through_follower:  # forwarded: the leader's word, not NOT_LEADER
                f.batch([actors[0].b.follow(os.urandom(20))])
            assert refusal(through_follower.value)[0] == Reason.STORAGE_FAILED.value, through_follower.value
            stuck = status(leader).block_height
            for node in (leader, follower):  # reads go on: readiness stays SERVING, accounts answer
                assert health_status(node.grpc_target, "readiness") == SERVING
                with node.client(timeout=10) as r:
                    r.stub.GetAccount(rpc_pb2.GetAccountRequest(owner_address=actors[0].address), timeout=5)
            time.sleep(2)  # an empty block is due every second: still nothing lands
            assert status(leader).block_height == stuck

            small_etcd.members[0].kill()  # the operator makes room: a larger quota, then disarms the alarm
            small_etcd.members[0].extra = ROOMY
            small_etcd.restart(0)
            disarm(small_etcd)
            small_etcd.wait_healthy()
            commit_retrying(c, actors[1].b.follow(os.urandom(20)), timeout=60)  # writes are admitted again
            for h in accepted:  # nothing accepted before the alarm was lost
                c.wait_committed(h, timeout=60)
            assert any("etcd takes appends again" in line for line in leader.stderr_lines)
            assert value(scrape(leader.ready["metrics_port"]), "chain_etcd_no_space") == 0
        height = status(leader).block_height
        wait_height(nodes.nodes, height)
        assert_same_chain(nodes.nodes, height)
    finally:
        nodes.stop()


def disarm(etcd: EtcdCluster, timeout: float = 30.0) -> None:
    """`etcdctl alarm disarm`, retried while the restarted member comes up."""
    deadline = time.monotonic() + timeout
    cmd = ["etcdctl", "--endpoints", etcd.endpoints_flag, "alarm", "disarm"]
    while subprocess.run(cmd, env=dict(os.environ, ETCDCTL_API="3"), capture_output=True, check=False).returncode:
        assert time.monotonic() < deadline, "etcdctl alarm disarm kept failing"
        time.sleep(0.3)


def test_with_etcd_full_and_the_leader_gone_the_refusal_still_names_etcd(
    tmp_path: Path, small_etcd: EtcdCluster
) -> None:
    """No member can write its campaign either: a client is told STORAGE_FAILED (etcd full), not "no leader",
    and once there is room a member is elected and writes commit."""
    nodes = ReplicaSet(tmp_path, small_etcd, block_interval=0.1).start(2)
    try:
        lead = leader_index(nodes)
        survivor = nodes.nodes[1 - lead]
        with nodes.nodes[lead].client(timeout=10) as c:
            actors = funded_actors(c, nodes.authority(), 4)
            fill_until_refused(c, actors, [])
        nodes.kill(lead)  # its lease expires; the survivor's campaign is a write etcd refuses
        with survivor.client(timeout=10) as f:
            deadline = time.monotonic() + 30
            while True:
                with pytest.raises(grpc.RpcError) as refused:
                    f.batch([actors[0].b.follow(os.urandom(20))])
                if refusal(refused.value)[0] == Reason.STORAGE_FAILED.value or time.monotonic() > deadline:
                    break
                time.sleep(0.2)  # NOT_LEADER while the dead leader's lease runs out and a campaign is tried
            reason, hint = refusal(refused.value)
            assert reason == Reason.STORAGE_FAILED.value and "NOSPACE" in (refused.value.details() or ""), refused.value
            assert hint is not None
            small_etcd.members[0].kill()
            small_etcd.members[0].extra = ROOMY
            small_etcd.restart(0)
            disarm(small_etcd)
            small_etcd.wait_healthy()
            commit_retrying(f, actors[1].b.follow(os.urandom(20)), timeout=60)
        assert status(survivor).role == "leader"
    finally:
        nodes.stop()
