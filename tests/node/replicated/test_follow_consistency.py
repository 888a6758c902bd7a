"""A `--follow` replica's linearizable read (docs/replication.md, "Read consistency"): it has no log of its
own, so it asks its upstream's height linearizably (GetNodeStatus with `chain-read-consistency:
linearizable`) and answers at or past it. Held behind (its store writer stopped), it never answers older
than a write the upstream already shows: it refuses at the deadline, then answers once it applied the
block; with the upstream gone, CONSISTENCY_UNAVAILABLE, while a default read still answers."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from chain.v1 import rpc_pb2
from node.sdk.rpc import reason_of
from tests.fixtures.actors import RemoteActor
from tests.fixtures.nodeproc import NodeProcess
from tests.fixtures.replicaset import ENV, funded_actors, status, wait_height
from tests.node.replicated.held import LINEARIZABLE, Later, get, held_behind, refused


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[NodeProcess, NodeProcess, RemoteActor]]:
    work = Path(tmp_path_factory.mktemp("follow-consistency"))
    upstream = NodeProcess(work / "up", "--verify-workers", "0", env=ENV).start(120)
    replica: NodeProcess | None = None
    try:
        with upstream.client() as c:
            actor = funded_actors(c, upstream.authority(), 1)[0]
            snap = c.admin.CreateSnapshot(rpc_pb2.CreateSnapshotRequest()).snapshot  # type: ignore[union-attr]
        snapshot_dir = work / "up" / "snapshots" / snap.name
        replica = NodeProcess(
            work / "replica", "--verify-workers", "0", "--restore", str(snapshot_dir),
            "--follow", upstream.internal_target, env=ENV,
        ).start(120)  # fmt: skip
        wait_height([replica], status(upstream).block_height)
        yield upstream, replica, actor
    finally:
        if replica is not None:
            replica.stop()
        upstream.stop()


def test_a_replica_held_behind_never_answers_older_than_its_upstream(
    pair: tuple[NodeProcess, NodeProcess, RemoteActor],
) -> None:
    upstream, replica, actor = pair
    with held_behind(replica):
        with upstream.client(timeout=30) as c:
            written = c.commit(actor.b.follow(b"\x05" * 20))[0]
        assert reason_of(refused(replica, written, ())) == "NOT_FOUND"  # the default read: its own state
        err = refused(replica, written, LINEARIZABLE)
        assert (err.code(), reason_of(err)) == (grpc.StatusCode.UNAVAILABLE, "HEIGHT_NOT_REACHED"), err.details()
        waiting = Later(replica, written, LINEARIZABLE)
    assert waiting.result() >= written.block_number


def test_without_its_upstream_a_replica_refuses_a_linearizable_read(
    pair: tuple[NodeProcess, NodeProcess, RemoteActor],
) -> None:
    """Last in the module: the upstream stops."""
    upstream, replica, actor = pair
    with upstream.client(timeout=30) as c:
        written = c.commit(actor.b.follow(b"\x06" * 20))[0]
    wait_height([replica], written.block_number)
    upstream.stop()
    err = refused(replica, written, LINEARIZABLE)
    assert (err.code(), reason_of(err)) == (grpc.StatusCode.UNAVAILABLE, "CONSISTENCY_UNAVAILABLE"), err.details()
    assert get(replica, written, (), 10) >= written.block_number
