"""State sync under faults: kill -9 during the transfer and during the restore, a damaged chunk, a manifest
that does not match the log. Nothing unchecked is ever put in place; a restart resumes or starts over and
converges on the same roots."""

from __future__ import annotations

import signal
import time
from pathlib import Path

from chain.v1 import snapshot_sync_pb2
from node.server.snapshots.manager import SnapshotManager
from node.server.snapshots.staging import STAGING_DIR
from tests.fixtures.etcdproc import EtcdCluster
from tests.fixtures.replicaset import ReplicaSet, assert_same_chain, wait_height
from tests.fixtures.statesync import (
    COMPACT,
    advance,
    fill,
    run_state_sync,
    snapshot,
    start_state_sync,
    wait_compacted,
)

CHUNK = 64 * 1024
SLOW = (*COMPACT, "--snapshot-chunk-bytes", str(CHUNK), "--state-sync-rate", str(8 * CHUNK))  # ~8 chunks/s


def served_network(tmp_path: Path, etcd: EtcdCluster, count: int, follows: int) -> tuple[ReplicaSet, int]:
    nodes = ReplicaSet(tmp_path, etcd, *SLOW, block_interval=0.1).start(count)
    fill(nodes.nodes[0], follows)
    snap = snapshot(nodes.nodes[0])
    advance(nodes, 5)
    wait_compacted(etcd, snap.block_number)
    return nodes, snap.block_number


def rejoin_and_converge(nodes: ReplicaSet, data_dir: Path) -> list[str]:
    newcomer = nodes.add(data_dir=data_dir)
    height = advance(nodes, 2)
    wait_height(nodes.alive(), height)
    assert_same_chain(nodes.alive(), height)
    return newcomer.stderr_lines


def test_kill_9_during_the_transfer_then_restart_resumes(tmp_path: Path, etcd1: EtcdCluster) -> None:
    nodes, _ = served_network(tmp_path, etcd1, 3, 1000)
    joiner = tmp_path / "n3"
    try:
        proc = start_state_sync(nodes, joiner, "n3")
        staged = joiner / STAGING_DIR / "data.mdb"
        deadline = time.monotonic() + 60
        while not (staged.exists() and staged.stat().st_size >= 3 * CHUNK):
            assert proc.poll() is None, proc.communicate()[1]
            assert time.monotonic() < deadline, "the transfer never started"
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert not (joiner / "data.mdb").exists()  # a partial transfer is never the store
        lines = rejoin_and_converge(nodes, joiner)
        resumed = [line for line in lines if "resuming the restore" in line]
        assert resumed and " 0 of " not in resumed[0], lines[-20:]
        assert not (joiner / STAGING_DIR).exists()
    finally:
        nodes.stop()


def test_kill_9_during_the_restore_then_restart_converges(tmp_path: Path, etcd1: EtcdCluster) -> None:
    nodes, _ = served_network(tmp_path, etcd1, 3, 1000)
    joiner = tmp_path / "n3"
    try:
        proc = start_state_sync(nodes, joiner, "n3")
        assert proc.stderr is not None
        for line in proc.stderr:  # killed as soon as every chunk is in: while it verifies and renames
            if "chunks received and checked" in line:
                proc.send_signal(signal.SIGKILL)
                break
        proc.wait()
        store, staged = joiner / "data.mdb", joiner / STAGING_DIR / "data.mdb"
        assert store.exists() or staged.exists()  # either side of the rename, never a half of it
        lines = rejoin_and_converge(nodes, joiner)
        assert not (joiner / STAGING_DIR).exists(), lines[-20:]
    finally:
        nodes.stop()


def tamper(nodes: ReplicaSet) -> tuple[Path, snapshot_sync_pb2.SnapshotManifest]:
    manager = SnapshotManager(None, nodes.nodes[0].data_dir / "snapshots", chunk_bytes=CHUNK)
    manifest, directory = manager.manifest()
    return directory, manifest


def test_a_damaged_chunk_is_refused(tmp_path: Path, etcd1: EtcdCluster) -> None:
    nodes, _ = served_network(tmp_path, etcd1, 1, 300)
    try:
        directory, manifest = tamper(nodes)
        with (directory / "data.mdb").open("r+b") as f:  # one flipped byte in the middle of the served copy
            f.seek(manifest.total_size // 2)
            byte = f.read(1)
            f.seek(manifest.total_size // 2)
            f.write(bytes([byte[0] ^ 0xFF]))
        result = run_state_sync(nodes, tmp_path / "joiner", "n9")
        assert result.returncode == 1
        assert "hash mismatch" in result.stderr
        assert not (tmp_path / "joiner" / "data.mdb").exists()
    finally:
        nodes.stop()


def test_a_manifest_that_is_not_the_block_in_the_log_is_refused(tmp_path: Path, etcd1: EtcdCluster) -> None:
    nodes, _ = served_network(tmp_path, etcd1, 1, 100)
    try:
        directory, manifest = tamper(nodes)
        manifest.block_hash = bytes(32)  # a snapshot claiming another block header at that number
        (directory / "manifest.pb").write_bytes(manifest.SerializeToString())
        result = run_state_sync(nodes, tmp_path / "joiner", "n9")
        assert result.returncode == 1
        assert "is not the one of block" in result.stderr
        assert not (tmp_path / "joiner" / "data.mdb").exists()
        assert not (tmp_path / "joiner" / STAGING_DIR).exists()  # refused before a single chunk was fetched
    finally:
        nodes.stop()


def test_a_state_sync_past_its_budget_stops_and_the_next_try_resumes(tmp_path: Path, etcd1: EtcdCluster) -> None:
    nodes, block = served_network(tmp_path, etcd1, 1, 1000)
    joiner = tmp_path / "joiner"
    try:
        late = run_state_sync(nodes, joiner, "n9", "--restore-timeout", "1")  # ~4 s of chunks at the served rate
        assert late.returncode == 1
        assert "did not finish within --restore-timeout 1s" in late.stderr
        assert not (joiner / "data.mdb").exists()
        assert (joiner / STAGING_DIR / "data.mdb").stat().st_size > 0  # kept for the next try
        again = run_state_sync(nodes, joiner, "n9")
        assert again.returncode == 0, again.stderr[-2000:]
        resumed = [line for line in again.stderr.splitlines() if "resuming the restore" in line]
        assert resumed and " 0 of " not in resumed[0]
        assert f"state-synced block {block} from n0" in again.stdout
        assert (joiner / "data.mdb").exists() and not (joiner / STAGING_DIR).exists()
    finally:
        nodes.stop()
