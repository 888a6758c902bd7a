"""The store writer lost twice while a block is built (its tree update), before anything is stored or, on a
replicated member, appended to the log: the node refuses writes with STORAGE_FAILED and retries at its
backoff (a lone replicated member retries leadership with it), and once the writer survives again it commits
by itself every message it accepted. Nothing committed before is lost.

The fault is the writer's test hook (`CHAIN_TEST_WRITER_DIE=update:<flag>`): every writer child exits at its
tree update while the flag file exists, as a child the OOM killer takes at each attempt would.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import grpc

from chain.v1 import message_pb2 as pb
from node.sdk.rpc import ChainClient, reason_of
from node.storage.writer import DIE_ENV
from tests.fixtures.actors import fresh
from tests.fixtures.etcdproc import EtcdCluster
from tests.fixtures.health import NOT_SERVING, SERVING, health_status, wait_health
from tests.fixtures.nodeproc import NodeProcess
from tests.fixtures.replicaset import (
    ReplicaSet,
    commit_retrying,
    funded_actors,
    leader_index,
    status,
    wait_elected_again,
)
from tests.fixtures.scrape import scrape, value


def refused_while_lost(c: ChainClient, make: Callable[[], pb.Message], flag: Path) -> list[bytes]:
    """Turn the fault on and submit until the node refuses; the hashes it accepted first."""
    flag.touch()
    accepted: list[bytes] = []
    deadline = time.monotonic() + 30
    while True:
        assert time.monotonic() < deadline, "the node kept accepting while its writer was lost at every block"
        try:
            accepted.append(c.submit(make()))
        except grpc.RpcError as err:
            assert reason_of(err) == "STORAGE_FAILED", err
            return accepted
        time.sleep(0.02)


def test_a_solo_node_whose_writer_is_lost_twice_refuses_then_commits_what_it_accepted(tmp_path: Path) -> None:
    flag = tmp_path / "writer-dies"
    node = NodeProcess(tmp_path / "data", "--web-addr", "", env={DIE_ENV: f"update:{flag}"}).start()
    try:
        c = node.client(timeout=10)
        before = [fresh() for _ in range(3)]
        c.commit(*before)
        height = status(node).block_height

        accepted = refused_while_lost(c, fresh, flag)
        assert accepted, "nothing was accepted before the first block failed"
        wait_health(node.grpc_target, NOT_SERVING, timeout=10, why="ready while its writer is lost")
        assert value(scrape(node.ready["metrics_port"]), "chain_storage_failed") == 1
        assert any("STORAGE FAILED" in line and "writer" in line for line in node.stderr_lines)
        assert status(node).block_height == height  # nothing half-stored

        flag.unlink()
        for h in accepted:
            c.wait_committed(h, timeout=30)  # retried at the backoff, by itself
        wait_health(node.grpc_target, SERVING, timeout=10, why="not ready again after the writer recovered")
        assert any("storage recovered" in line for line in node.stderr_lines)
        for m in before:
            c.wait_committed(bytes(m.hash), timeout=5)
    finally:
        node.stop()


def test_a_lone_member_whose_writer_is_lost_before_the_append_retries_leadership_and_recovers(
    tmp_path: Path, etcd1: EtcdCluster
) -> None:
    """Nothing reached the log, so no other member (there is none) and no log entry will retry the block:
    the member must lead again at its backoff to do it (replicated.py, `_unfit`)."""
    flag = tmp_path / "writer-dies"
    nodes = ReplicaSet(tmp_path, etcd1)
    try:
        node = nodes.add(env={DIE_ENV: f"update:{flag}"})
        assert leader_index(nodes) == 0
        with ChainClient(node.grpc_target, timeout=10) as c:
            actor = funded_actors(c, nodes.authority(), 1)[0]
            height = status(node).block_height

            accepted = refused_while_lost(c, lambda: actor.b.follow(os.urandom(20)), flag)
            assert accepted, "nothing was accepted before the first block failed"
            wait_elected_again(node, 2, why="the lone member did not lead again to retry its block")
            assert status(node).block_height == height  # nothing appended, nothing applied
            assert health_status(node.grpc_target, "readiness") == NOT_SERVING

            flag.unlink()
            commit_retrying(c, actor.b.follow(os.urandom(20)), timeout=60)
            for h in accepted:
                c.wait_committed(h, timeout=30)
            assert status(node).role == "leader"
            assert any("storage recovered" in line for line in node.stderr_lines)
    finally:
        nodes.stop()
