"""A `--follow` read replica started from a snapshot: catches up, matches every root, forwards writes."""

from __future__ import annotations

import time
from pathlib import Path

import grpc
import pytest

from chain.v1 import rpc_pb2
from node.sdk.rpc import reason_of
from tests.fixtures.nodeproc import NodeProcess
from tests.fixtures.replicaset import ENV, assert_same_chain, funded_actors, status, wait_height


@pytest.mark.parametrize("workers", ["0", "2"], ids=["main-only", "read-workers-2"])
def test_follow_replica_from_snapshot(tmp_path: Path, workers: str) -> None:
    """With read workers on both nodes, the replica's stream of blocks, the forwarded writes (and their
    member proof) and the NOT_LEADER refusal all pass through a worker's relay on each side."""
    upstream = NodeProcess(tmp_path / "up", "--verify-workers", "0", "--read-workers", workers, env=ENV).start(120)
    replica: NodeProcess | None = None
    try:
        with upstream.client() as c:
            actors = funded_actors(c, upstream.authority(), 3)
            snap = c.admin.CreateSnapshot(rpc_pb2.CreateSnapshotRequest()).snapshot  # type: ignore[union-attr]
            for i, a in enumerate(actors):  # blocks the replica must fetch beyond its snapshot
                c.commit(a.b.project_create(f"p{i}"))
        snapshot_dir = tmp_path / "up" / "snapshots" / snap.name
        replica = NodeProcess(
            tmp_path / "replica",
            "--verify-workers", "0", "--restore", str(snapshot_dir), "--follow", upstream.internal_target,
            "--read-workers", workers, env=ENV,
        ).start(120)  # fmt: skip
        assert replica.ready["height"] == snap.block_number
        wait_height([replica], status(upstream).block_height)
        assert status(replica).role == "replica"
        assert status(replica).leader == upstream.internal_target

        with replica.client() as r:  # a write to the replica is checked there and committed upstream
            committed = r.commit(actors[0].b.project_create("via-replica"))[0]
            # the name is taken (a state rule: the replica forwards it and the upstream refuses it); another
            # description, so it is never the very message that created p1 (the same second gave the same hash)
            bad = actors[1].b.project_create("p1", description="again")
            results = r.batch([bad])
            assert not results[0].accepted and results[0].reason_code == "NAME_TAKEN"
        with upstream.client() as c:
            c.wait_committed(bytes(committed.message.hash))
        height = status(upstream).block_height
        wait_height([replica], height)
        assert_same_chain([upstream, replica], height)

        with replica.client() as r:  # live blocks arrive on the stream too
            for i in range(3):
                r.commit(actors[2].b.follow(bytes([i]) * 20))
        height = status(upstream).block_height
        wait_height([replica], height)
        assert_same_chain([upstream, replica], height)

        upstream.stop()  # upstream gone: reads still served, writes UNAVAILABLE
        with replica.client(timeout=10) as r:
            assert status(replica).block_height == height
            deadline = time.monotonic() + 10
            try:
                r.submit(actors[2].b.follow(b"\x09" * 20))
                raise AssertionError("a write without upstream was accepted")
            except grpc.RpcError as err:
                assert reason_of(err) == "NOT_LEADER"
                assert isinstance(err, grpc.Call) and err.code() == grpc.StatusCode.UNAVAILABLE
            assert time.monotonic() < deadline
    finally:
        if replica is not None:
            replica.stop()
        upstream.stop()
