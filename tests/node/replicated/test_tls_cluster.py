"""A replicated cluster with TLS on every hop: etcd with client-certificate authentication and peer TLS,
members serving and dialling each other over mutual TLS under one cluster CA, clients over `grpcs://`.
Failover under load, state sync of an empty member, and a `--follow` replica all go over those channels."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from chain.v1 import rpc_pb2
from tests.fixtures.certs import TestCA
from tests.fixtures.etcdproc import EtcdCluster
from tests.fixtures.nodeproc import NodeProcess, NodeTLSFiles
from tests.fixtures.replicaset import (
    ENV,
    Load,
    ReplicaSet,
    assert_same_chain,
    committed_counts,
    funded_actors,
    leader_index,
    status,
    wait_height,
)
from tests.fixtures.statesync import COMPACT, advance, snapshot, wait_compacted

SECRET = "cluster-secret-for-tls-tests-0123"


@pytest.fixture
def ca(tmp_path: Path) -> TestCA:
    return TestCA.make(tmp_path / "pki")


@pytest.fixture
def etcd_tls(tmp_path: Path, ca: TestCA) -> Iterator[EtcdCluster]:
    cluster = EtcdCluster(tmp_path / "etcd", 3, tls=ca).start()
    yield cluster
    cluster.stop()


def test_failover_state_sync_and_a_follower_with_tls_on_every_hop(
    tmp_path: Path, ca: TestCA, etcd_tls: EtcdCluster
) -> None:
    assert etcd_tls.endpoints[0].startswith("https://")
    nodes = ReplicaSet(tmp_path / "nodes", etcd_tls, *COMPACT, "--cluster-secret", SECRET, tls=ca).start(3)
    replica: NodeProcess | None = None
    try:
        # failover under load: writes through every member (followers forward over mutual TLS)
        with nodes.nodes[1].client() as c:
            actors = funded_actors(c, nodes.authority(), 4, units=10)
        load = Load(nodes, actors).start()
        time.sleep(2)
        old = leader_index(nodes)
        nodes.kill(old)
        survivor = nodes.nodes[(old + 1) % 3]
        killed_at = time.monotonic()
        while not (status(survivor).leader and status(survivor).leader != nodes.nodes[old].internal_target):
            assert time.monotonic() - killed_at < 10, "no new leader"
            time.sleep(0.1)
        time.sleep(2)
        load.stop()
        load.settle()
        nodes.restart(old)
        height = max(status(n).block_height for n in nodes.alive())
        wait_height(nodes.nodes, height)
        counts = committed_counts(assert_same_chain(nodes.nodes, height))
        assert len(load.sent) >= 30
        assert all(counts.get(h) == 1 for h in load.sent), "an acknowledged message is missing or repeated"

        # state sync over mutual TLS: an empty member joins from a snapshot the log was compacted below
        source = nodes.nodes[leader_index(nodes)]
        snap = snapshot(source)
        advance(nodes, 15)
        wait_compacted(etcd_tls, snap.block_number)
        newcomer = nodes.add(data_dir=tmp_path / "empty")
        assert any(f"state-synced block {snap.block_number}" in line for line in newcomer.stderr_lines)

        # a --follow replica on the leader's internal listener, with a certificate of the cluster's CA
        leader = nodes.nodes[leader_index(nodes)]
        replica = NodeProcess(
            tmp_path / "replica",
            "--verify-workers", "0", "--restore", str(source.data_dir / "snapshots" / snap.name),
            "--follow", leader.internal_target, env=ENV, tls=NodeTLSFiles.issue(ca, "replica"),
        ).start(120)  # fmt: skip
        with replica.client() as r:
            committed = r.commit(actors[0].b.project_create("over-tls"))[0]
        height = max(status(n).block_height for n in nodes.alive())
        wait_height([*nodes.alive(), replica], height)
        assert_same_chain([*nodes.alive(), replica], height)
        with leader.client() as c:
            got = c.stub.GetMessage(rpc_pb2.GetMessageRequest(hash=committed.message.hash), timeout=5)
            assert got.message.message.hash == committed.message.hash
    finally:
        if replica is not None:
            replica.stop()
        nodes.stop()
