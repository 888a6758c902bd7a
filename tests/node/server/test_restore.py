"""`--restore` is staged, checked and renamed into place: an interrupted restore never leaves a store the next
start misreads, a damaged snapshot is refused, and a restore has its own time budget."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from chain.v1 import rpc_pb2
from node.server.snapshots.manager import manifest_of
from node.server.snapshots.manifest import read_chunks
from node.server.snapshots.staging import STAGING_DIR, Staging
from tests.fixtures.nodeproc import NodeProcess
from tests.fixtures.replicaset import ENV, wait_bootstrapped

ARGS = ("--verify-workers", "0")


@pytest.fixture(scope="module")
def snapshot_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A snapshot of a solo devnet, its manifest in 4 KiB chunks (several chunks even for a small store)."""
    work = tmp_path_factory.mktemp("upstream")
    node = NodeProcess(work / "up", *ARGS, "--snapshot-chunk-bytes", "4096", env=ENV).start()
    try:
        with node.client() as c:
            wait_bootstrapped(c, node.authority())
            snap = c.admin.CreateSnapshot(rpc_pb2.CreateSnapshotRequest()).snapshot  # type: ignore[union-attr]
    finally:
        assert node.stop() == 0
    directory = work / "up" / "snapshots" / snap.name
    assert manifest_of(directory, 4096).chunk_count > 3
    yield directory


def height(node: NodeProcess) -> int:
    return int(node.ready["height"])


def expected_height(snapshot_dir: Path) -> int:
    return int(manifest_of(snapshot_dir).block_number)


def test_an_interrupted_restore_is_started_over(tmp_path: Path, snapshot_dir: Path) -> None:
    data = tmp_path / "data"
    manifest = manifest_of(snapshot_dir)
    staging = Staging(data)
    staging.begin(manifest)  # what a restore killed after two chunks leaves behind
    chunks = read_chunks(snapshot_dir / "data.mdb", int(manifest.chunk_size))
    staging.write(manifest, (c for c in chunks if c[0] < 2), 0, time.monotonic() + 60)
    node = NodeProcess(data, *ARGS, "--restore", str(snapshot_dir), env=ENV).start()
    try:
        assert height(node) == expected_height(snapshot_dir)
        assert not (data / STAGING_DIR).exists()
    finally:
        assert node.stop() == 0


def test_a_crash_after_the_rename_leaves_a_whole_store(tmp_path: Path, snapshot_dir: Path) -> None:
    data = tmp_path / "data"
    node = NodeProcess(data, *ARGS, "--restore", str(snapshot_dir), env=ENV).start()
    assert node.stop() == 0
    (data / STAGING_DIR).mkdir()  # killed after the rename, before the staging directory was removed
    (data / STAGING_DIR / "manifest.pb").write_bytes(b"")
    again = NodeProcess(data, *ARGS, env=ENV).start()
    try:
        assert height(again) >= expected_height(snapshot_dir)
        assert not (data / STAGING_DIR).exists()
    finally:
        assert again.stop() == 0


def test_a_damaged_snapshot_is_refused(tmp_path: Path, snapshot_dir: Path) -> None:
    damaged = tmp_path / snapshot_dir.name
    damaged.mkdir()
    for name in ("data.mdb", "snapshot.json", "manifest.pb"):
        (damaged / name).write_bytes((snapshot_dir / name).read_bytes())
    with (damaged / "data.mdb").open("r+b") as f:
        f.seek(5000)
        byte = f.read(1)
        f.seek(5000)
        f.write(bytes([byte[0] ^ 0x01]))
    node = NodeProcess(tmp_path / "data", *ARGS, "--restore", str(damaged), env=ENV)
    with pytest.raises(RuntimeError, match="chunk 1 hash mismatch"):
        node.start()
    assert not (tmp_path / "data" / "data.mdb").exists()


def test_a_restore_past_its_budget_stops_and_leaves_no_store(tmp_path: Path, snapshot_dir: Path) -> None:
    data = tmp_path / "data"
    node = NodeProcess(data, *ARGS, "--restore", str(snapshot_dir), "--restore-timeout", "0", env=ENV)
    with pytest.raises(RuntimeError, match="ran out of time"):
        node.start()
    assert not (data / "data.mdb").exists()
    retry = NodeProcess(data, *ARGS, "--restore", str(snapshot_dir), env=ENV).start()
    try:
        assert height(retry) == expected_height(snapshot_dir)
    finally:
        assert retry.stop() == 0
