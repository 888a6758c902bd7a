"""etcd member loss on a 3-member cluster: one lost keeps committing; quorum lost stops writes, not reads; the
nodes' log watches move off a member that dies."""

from __future__ import annotations

import re
import time
import urllib.request
from pathlib import Path

import grpc

from chain.v1 import rpc_pb2
from node.errors import trailer as read_trailer
from node.sdk.rpc import reason_of
from tests.fixtures.etcdproc import EtcdCluster
from tests.fixtures.replicaset import ReplicaSet, assert_same_chain, funded_actors, status, wait_height


def trailer(err: grpc.RpcError, key: str) -> str:
    assert isinstance(err, grpc.Call)
    return read_trailer(err.trailing_metadata(), key) or ""


def test_member_loss_and_quorum_loss(tmp_path: Path, etcd3: EtcdCluster) -> None:
    nodes = ReplicaSet(tmp_path, etcd3).start(3)
    try:
        with nodes.nodes[1].client(timeout=10) as c:
            actor = funded_actors(c, nodes.authority(), 1)[0]
            c.commit(actor.b.project_create("before"))

            etcd3.kill(0)  # one of three members: the network keeps committing
            c.commit(actor.b.project_create("one-member-down"), timeout=30)

            etcd3.kill(1)  # quorum lost: writes stop with UNAVAILABLE and a retry hint
            deadline = time.monotonic() + 20
            while True:
                try:
                    c.submit(actor.b.follow(b"\x01" * 20))
                except grpc.RpcError as err:
                    if reason_of(err) == "NOT_LEADER":
                        assert isinstance(err, grpc.Call) and err.code() == grpc.StatusCode.UNAVAILABLE
                        assert int(trailer(err, "retry-after-ms")) > 0
                        break
                assert time.monotonic() < deadline, "writes did not stop after quorum loss"
                time.sleep(0.2)
            for n in nodes.nodes:  # reads keep working on every node
                assert status(n).block_height >= 3
                with n.client(timeout=5) as r:
                    r.stub.GetAccount(rpc_pb2.GetAccountRequest(owner_address=actor.address), timeout=5)

            etcd3.restart(0)
            etcd3.restart(1)
            etcd3.wait_healthy()
            deadline = time.monotonic() + 30
            while True:  # commits resume once quorum is back (and a leader is elected again)
                try:
                    c.commit(actor.b.project_create("after"), timeout=30)
                    break
                except grpc.RpcError as err:
                    assert reason_of(err) == "NOT_LEADER"
                    assert time.monotonic() < deadline
                    time.sleep(0.5)
        height = max(status(n).block_height for n in nodes.nodes)
        wait_height(nodes.nodes, height)
        assert_same_chain(nodes.nodes, height)
    finally:
        nodes.stop()


WATCHERS = re.compile(r"^etcd_debugging_mvcc_watcher_total (\S+)$", re.MULTILINE)
WATCHES_PER_NODE = 2  # the log's `next` (watch.py) and the election's `leader` (election.py)


def watchers(url: str) -> int:
    """The watchers an etcd member holds now (its own gauge, read from its /metrics)."""
    with urllib.request.urlopen(url + "/metrics", timeout=5) as resp:
        found = WATCHERS.search(resp.read().decode())
    assert found is not None, "etcd does not export etcd_debugging_mvcc_watcher_total"
    return int(float(found.group(1)))


def test_watches_move_to_a_live_member_when_theirs_dies(tmp_path: Path, etcd3: EtcdCluster) -> None:
    """Each node watches the log and the leader key on one etcd member (node/server/ordering/etcd/watch.py).
    Killed, that member takes the watches with it: every node must open both again on a member that lives
    (else it polls the log 20 times a second and the leader key 4 times for good), and the followers must
    go on applying what the leader commits."""
    nodes = ReplicaSet(tmp_path, etcd3).start(3)
    try:
        urls = etcd3.endpoints
        deadline = time.monotonic() + 20
        wanted = WATCHES_PER_NODE * len(nodes.nodes)
        while sum(held := [watchers(u) for u in urls]) < wanted:
            assert time.monotonic() < deadline, f"the nodes' watches did not open: {held}"
            time.sleep(0.2)
        victim = max(range(len(urls)), key=lambda i: held[i])
        etcd3.kill(victim)
        alive = [u for i, u in enumerate(urls) if i != victim]
        deadline = time.monotonic() + 30
        while sum(moved := [watchers(u) for u in alive]) < wanted:
            assert time.monotonic() < deadline, f"watches held by the live members: {moved}"
            time.sleep(0.2)
        with nodes.nodes[0].client(timeout=10) as c:
            actor = funded_actors(c, nodes.authority(), 1)[0]
            c.commit(actor.b.project_create("after-the-move"), timeout=30)
        height = max(status(n).block_height for n in nodes.nodes)
        wait_height(nodes.nodes, height)
        assert_same_chain(nodes.nodes, height)
    finally:
        nodes.stop()
