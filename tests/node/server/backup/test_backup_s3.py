"""Off-cluster backups against a real S3-API server (moto in server mode) and real chain-node processes:
back up, list, prune, then restore with every original volume deleted; and the unhappy paths (a damaged
chunk object, an upload killed mid-way, wrong credentials, a missing bucket, a data dir that holds a store)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest

from chain.v1 import rpc_pb2, snapshot_sync_service_pb2_grpc
from chain.v1 import snapshot_sync_pb2 as sync_pb
from node.server.snapshots.staging import STAGING_DIR
from tests.fixtures.actors import RemoteActor, new_account
from tests.fixtures.backupcli import backup
from tests.fixtures.motoproc import Credentials, MotoProcess, serving_bucket
from tests.fixtures.nodeproc import ROOT, NodeProcess
from tests.fixtures.replicaset import wait_bootstrapped

BUCKET = "chain-backups"
# 4 KiB chunks: even a small devnet store is many chunks; no empty blocks: the state stays where it was put
NODE_ARGS = ("--verify-workers", "0", "--snapshot-chunk-bytes", "4096", "--empty-block-interval", "3600")
NODE_ENV = {"CHAIN_NODE_METRICS_ADDR": ""}


@pytest.fixture(scope="module")
def moto(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MotoProcess]:
    with serving_bucket(tmp_path_factory.mktemp("moto"), BUCKET) as server:
        yield server


@dataclass
class Source:
    node: NodeProcess
    actor: RemoteActor


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Source]:
    """A devnet node with a few committed blocks (an account, projects) and one snapshot."""
    node = NodeProcess(tmp_path_factory.mktemp("source") / "data", *NODE_ARGS, env=NODE_ENV).start()
    try:
        with node.client() as c:
            actor = new_account(c, node.authority())
            for i in range(3):
                c.commit(actor.b.project_create(f"backed-up-{i}"))
            snapshot(node)
        yield Source(node, actor)
    finally:
        node.stop()


def snapshot(node: NodeProcess) -> rpc_pb2.CreateSnapshotResponse:
    with node.client() as c:
        assert c.admin is not None
        return c.admin.CreateSnapshot(rpc_pb2.CreateSnapshotRequest())


def head_of(node: NodeProcess) -> tuple[int, bytes]:
    with node.client() as c:
        status = c.stub.GetNodeStatus(rpc_pb2.GetNodeStatusRequest()).status
        return int(status.block_height), bytes(status.state_root)


def reads(node: NodeProcess, actor: RemoteActor, height: int) -> tuple[Any, ...]:
    """What a client reads: the account, its projects, the head block's header."""
    with node.client() as c:
        account = c.stub.GetAccount(rpc_pb2.GetAccountRequest(owner_address=actor.address)).account
        block = c.stub.GetBlock(rpc_pb2.GetBlockRequest(block_number=height)).block
        return account.SerializeToString(deterministic=True), bytes(block.hash), bytes(block.header.state_root)


def test_back_up_list_prune_and_restore_with_every_volume_lost(moto, tmp_path):
    url = f"s3://{BUCKET}/dr"
    node = NodeProcess(tmp_path / "node", *NODE_ARGS, env=NODE_ENV).start()
    with node.client() as c:
        actor = new_account(c, node.authority())
        c.commit(actor.b.project_create("first"))
    snapshot(node)
    first = backup(moto, "create", "--node", node.internal_target, "--url", url)
    assert first.code == 0, first.stderr
    assert first.doc["skipped"] is False and first.doc["url"].startswith(f"{url}/devnet/")
    again = backup(moto, "create", "--node", node.internal_target, "--url", url)  # the same block: nothing to upload
    assert again.code == 0 and again.doc["skipped"] is True and again.doc["name"] == first.doc["name"]

    with node.client() as c:
        for i in range(2):
            c.commit(actor.b.project_create(f"second-{i}"))
    snapshot(node)
    height, root = head_of(node)
    second = backup(moto, "create", "--node", node.internal_target, "--url", url)
    assert second.code == 0, second.stderr
    assert (second.doc["height"], second.doc["state_root"]) == (height, root.hex())
    listed = backup(moto, "list", "--url", url)
    assert [b["name"] for b in listed.doc["backups"]] == [first.doc["name"], second.doc["name"]]
    assert all(b["complete"] for b in listed.doc["backups"])

    pruned = backup(moto, "prune", "--url", url, "--keep", "1")
    assert pruned.code == 0, pruned.stderr
    assert pruned.doc["deleted"] == [first.doc["name"]] and pruned.doc["kept"] == [second.doc["name"]]
    assert [b["name"] for b in backup(moto, "list", "--url", url, "--all").doc["backups"]] == [second.doc["name"]]
    left = moto.s3().list_objects_v2(Bucket=BUCKET, Prefix=f"dr/devnet/{first.doc['name']}/")
    assert left.get("KeyCount", 0) == 0

    before = reads(node, actor, height)
    assert node.stop() == 0
    shutil.rmtree(tmp_path / "node")  # every volume lost: the store, its snapshots, the authority file

    restored = backup(moto, "restore", "--from", url, "--data-dir", str(tmp_path / "new"))
    assert restored.code == 0, restored.stderr
    assert (restored.doc["height"], restored.doc["state_root"]) == (height, root.hex())
    assert not (tmp_path / "new" / STAGING_DIR).exists()
    again_node = NodeProcess(tmp_path / "new", *NODE_ARGS, env=NODE_ENV).start()
    try:
        assert int(again_node.ready["height"]) == height
        assert head_of(again_node) == (height, root)
        assert reads(again_node, actor, height) == before
    finally:
        assert again_node.stop() == 0


def test_a_named_backup_is_restored_and_a_store_is_never_overwritten(moto, source, tmp_path):
    url = f"s3://{BUCKET}/named"
    made = backup(moto, "create", "--node", source.node.internal_target, "--url", url)
    assert made.code == 0, made.stderr
    data = tmp_path / "data"
    done = backup(moto, "restore", "--from", made.doc["url"], "--data-dir", str(data))
    assert done.code == 0, done.stderr
    assert done.doc["name"] == made.doc["name"]
    store = (data / "data.mdb").read_bytes()
    refused = backup(moto, "restore", "--from", made.doc["url"], "--data-dir", str(data))
    assert refused.code == 1 and "STORE_NOT_EMPTY" in refused.stderr
    assert (data / "data.mdb").read_bytes() == store
    replaced = backup(moto, "restore", "--from", url, "--data-dir", str(data), "--reinitialize")
    assert replaced.code == 0, replaced.stderr
    assert (Path(replaced.doc["moved_aside"]) / "data.mdb").read_bytes() == store  # kept, never deleted


def test_a_damaged_chunk_object_is_refused_and_leaves_no_store(moto, source, tmp_path):
    url = f"s3://{BUCKET}/damaged"
    made = backup(moto, "create", "--node", source.node.internal_target, "--url", url)
    assert made.code == 0, made.stderr
    s3 = moto.s3()
    key = f"damaged/devnet/{made.doc['name']}/data.mdb"
    body = bytearray(s3.get_object(Bucket=BUCKET, Key=key)["Body"].read())
    body[4096 * 2 + 100] ^= 0x01  # one bit of chunk 2
    s3.put_object(Bucket=BUCKET, Key=key, Body=bytes(body))
    data = tmp_path / "data"
    refused = backup(moto, "restore", "--from", url, "--data-dir", str(data))
    assert refused.code == 1
    assert "CHECKSUM_MISMATCH" in refused.stderr and "chunk 2" in refused.stderr
    assert not (data / "data.mdb").exists() and not (data / STAGING_DIR).exists()


def test_a_damaged_manifest_is_refused(moto, source, tmp_path):
    url = f"s3://{BUCKET}/manifest"
    made = backup(moto, "create", "--node", source.node.internal_target, "--url", url)
    assert made.code == 0, made.stderr
    s3 = moto.s3()
    key = f"manifest/devnet/{made.doc['name']}/manifest.pb"
    raw = bytearray(s3.get_object(Bucket=BUCKET, Key=key)["Body"].read())
    raw[-1] ^= 0x01  # the last chunk hash: still a well-formed manifest
    s3.put_object(Bucket=BUCKET, Key=key, Body=bytes(raw))
    refused = backup(moto, "restore", "--from", url, "--data-dir", str(tmp_path / "data"))
    assert refused.code == 1 and "CHECKSUM_MISMATCH" in refused.stderr
    assert "manifest.pb does not match backup.json" in refused.stderr  # refused before any chunk is fetched
    assert not (tmp_path / "data" / "data.mdb").exists() and not (tmp_path / "data" / STAGING_DIR).exists()


def planted_snapshot(node: NodeProcess, origin: Path, name: str) -> str:
    """Copy snapshot directory `origin` into `node`'s snapshots as `name` (its manifest made anew)."""
    target = node.data_dir / "snapshots" / name
    shutil.copytree(origin, target)
    (target / "manifest.pb").unlink(missing_ok=True)
    return name


def test_a_snapshot_that_is_not_the_nodes_block_or_is_damaged_is_not_backed_up(moto, source, tmp_path):
    url = f"s3://{BUCKET}/foreign"
    other = NodeProcess(tmp_path / "other", *NODE_ARGS, env=NODE_ENV).start()
    try:
        with other.client() as c:
            wait_bootstrapped(c, other.authority())
        info = snapshot(other).snapshot
    finally:
        other.stop()
    planted = source.node.data_dir / "snapshots"
    try:
        foreign = planted_snapshot(source.node, tmp_path / "other" / "snapshots" / info.name, "snap-000000000001-1")
        refused = backup(moto, "create", "--node", source.node.internal_target, "--url", url, "--snapshot", foreign)
        assert refused.code == 1 and "SOURCE_MISMATCH" in refused.stderr, refused.stderr

        own = snapshot(source.node).snapshot
        damaged = planted_snapshot(source.node, source.node.data_dir / "snapshots" / own.name, "snap-000000000002-2")
        with grpc.insecure_channel(source.node.internal_target) as channel:  # the node hashes it now, undamaged
            stub = snapshot_sync_service_pb2_grpc.SnapshotSyncServiceStub(channel)
            stub.GetSnapshotManifest(sync_pb.GetSnapshotManifestRequest(name=damaged), timeout=30)
        with (source.node.data_dir / "snapshots" / damaged / "data.mdb").open("r+b") as f:
            f.seek(4096 + 7)
            byte = f.read(1)
            f.seek(4096 + 7)
            f.write(bytes([byte[0] ^ 0x01]))
        refused = backup(moto, "create", "--node", source.node.internal_target, "--url", url, "--snapshot", damaged)
        assert refused.code == 1 and "CHECKSUM_MISMATCH" in refused.stderr and "chunk 1" in refused.stderr
        assert backup(moto, "list", "--url", url).doc["backups"] == []
    finally:  # the module's node serves only its own snapshots to the tests after this one
        for name in ("snap-000000000001-1", "snap-000000000002-2"):
            shutil.rmtree(planted / name, ignore_errors=True)


def test_an_upload_killed_midway_is_never_complete_and_is_pruned_later(moto, tmp_path):
    """kill -9 of `backup create` while it uploads: nothing is listed, restore finds nothing, a prune within
    the grace period leaves the upload alone, a prune after it removes every leftover."""
    url = f"s3://{BUCKET}/killed"
    # 20 KB/s from the node: the transfer takes seconds, so the kill lands mid-upload
    node = NodeProcess(tmp_path / "slow", *NODE_ARGS, "--state-sync-rate", "20000", env=NODE_ENV).start()
    try:
        with node.client() as c:
            actor = new_account(c, node.authority())
            c.commit(actor.b.project_create("slow"))
        snapshot(node)
        env = dict(os.environ, PYTHONPATH=str(ROOT), CHAIN_BACKUP_S3_ENDPOINT=moto.endpoint, **moto.credentials.env())
        proc = subprocess.Popen(
            [sys.executable, "-m", "node.server.main", "backup", "create", "--node", node.internal_target,
             "--url", url, "--part-bytes", "8192"],
            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            upload = wait_for_parts(moto, "killed/", proc)
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
    finally:
        node.stop()
    assert backup(moto, "list", "--url", url).doc["backups"] == []
    (partial,) = backup(moto, "list", "--url", url, "--all").doc["backups"]
    assert partial["complete"] is False
    missing = backup(moto, "restore", "--from", url, "--data-dir", str(tmp_path / "data"))
    assert missing.code == 1 and "BACKUP_NOT_FOUND" in missing.stderr
    within = backup(moto, "prune", "--url", url, "--keep", "1", "--grace-seconds", "3600")
    assert within.code == 0 and within.doc["uploads_aborted"] == []
    assert [u["UploadId"] for u in uploads(moto, "killed/")] == [upload]
    after = backup(moto, "prune", "--url", url, "--keep", "1", "--grace-seconds", "0")
    assert after.code == 0, after.stderr
    assert len(after.doc["uploads_aborted"]) == 1 and after.doc["incomplete_deleted"] == [partial["name"]]
    assert uploads(moto, "killed/") == []
    assert moto.s3().list_objects_v2(Bucket=BUCKET, Prefix="killed/").get("KeyCount", 0) == 0


def uploads(moto: MotoProcess, prefix: str) -> list[dict[str, Any]]:
    return list(moto.s3().list_multipart_uploads(Bucket=BUCKET, Prefix=prefix).get("Uploads", []))


def wait_for_parts(moto: MotoProcess, prefix: str, proc: subprocess.Popen[bytes], timeout: float = 60) -> str:
    """The id of the upload `proc` runs, once at least one part of it is stored."""
    s3 = moto.s3()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the backup finished before it could be interrupted"
        for u in uploads(moto, prefix):
            if s3.list_parts(Bucket=BUCKET, Key=u["Key"], UploadId=u["UploadId"]).get("Parts"):
                return str(u["UploadId"])
        time.sleep(0.05)
    raise TimeoutError("no part was uploaded")


def test_an_incomplete_backup_is_not_restored_by_name(moto, source, tmp_path):
    url = f"s3://{BUCKET}/incomplete"
    made = backup(moto, "create", "--node", source.node.internal_target, "--url", url)
    assert made.code == 0, made.stderr
    moto.s3().delete_object(Bucket=BUCKET, Key=f"incomplete/devnet/{made.doc['name']}/manifest.pb")
    assert backup(moto, "list", "--url", url).doc["backups"] == []
    refused = backup(moto, "restore", "--from", made.doc["url"], "--data-dir", str(tmp_path / "data"))
    assert refused.code == 1 and "INCOMPLETE_BACKUP" in refused.stderr
    assert backup(moto, "prune", "--url", url, "--keep", "1", "--grace-seconds", "0").doc["incomplete_deleted"] == [
        made.doc["name"]
    ]


def test_wrong_credentials_and_a_missing_bucket_are_typed_errors(moto, source, tmp_path):
    wrong = Credentials(moto.credentials.access_key, "not-the-secret")
    for args in (("list", "--url", f"s3://{BUCKET}/x"), ("create", "--node", source.node.internal_target, "--url",
                                                          f"s3://{BUCKET}/x")):  # fmt: skip
        run = backup(moto, *args, credentials=wrong)
        assert run.code == 1 and "ACCESS_DENIED" in run.stderr, run.stderr
        assert "not-the-secret" not in run.stderr
    unknown = backup(moto, "list", "--url", f"s3://{BUCKET}/x", credentials=Credentials("AKIAUNKNOWN", "x"))
    assert unknown.code == 1 and "ACCESS_DENIED" in unknown.stderr
    missing = backup(moto, "create", "--node", source.node.internal_target, "--url", "s3://no-such-bucket/x")
    assert missing.code == 1 and "BUCKET_MISSING" in missing.stderr
    restore = backup(moto, "restore", "--from", "s3://no-such-bucket/x", "--data-dir", str(tmp_path / "d"))
    assert restore.code == 1 and "BUCKET_MISSING" in restore.stderr
    usage = backup(moto, "prune", "--url", f"s3://{BUCKET}/x")
    assert usage.code == 2 and "--keep" in usage.stderr
