"""`chain-node backup etcd` against a moto S3 server: a real etcd's snapshot (etcdctl snapshot save) goes into
the chain's bucket under PREFIX/etcd/NETWORK/, the newest --keep stay, and the chain's own backups listing
is not disturbed by them."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fixtures.backupcli import backup
from tests.fixtures.etcdproc import EtcdCluster
from tests.fixtures.motoproc import MotoProcess, serving_bucket

BUCKET = "chain-backups"
URL = f"s3://{BUCKET}/prod"


@pytest.fixture(scope="module")
def moto(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MotoProcess]:
    with serving_bucket(tmp_path_factory.mktemp("moto"), BUCKET) as server:
        yield server


def etcd_snapshot(etcd: EtcdCluster, out: Path) -> Path:
    subprocess.run(
        ["etcdctl", f"--endpoints={etcd.endpoints[0]}", "put", "/chain/k", "v"], check=True, capture_output=True
    )
    subprocess.run(
        ["etcdctl", f"--endpoints={etcd.endpoints[0]}", "snapshot", "save", str(out)], check=True, capture_output=True
    )
    return out


def test_etcd_snapshots_go_to_the_chain_bucket_and_the_newest_are_kept(
    moto: MotoProcess, tmp_path: Path, etcd1: EtcdCluster
) -> None:
    snap = etcd_snapshot(etcd1, tmp_path / "partial.db")
    keys = []
    for _ in range(3):
        run = backup(moto, "etcd", "--url", URL, "--network", "mainnet", "--file", str(snap), "--keep", "2")
        assert run.code == 0, run.stderr
        assert run.doc["event"] == "etcd-backup-uploaded" and run.doc["bytes"] == snap.stat().st_size
        keys.append(run.doc["key"])
        assert run.doc["key"].startswith("prod/etcd/mainnet/etcd-")
        # one a second at most: the key is the UTC second of the upload
        time.sleep(1.05)
    s3 = moto.s3()
    listed = sorted(o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET, Prefix="prod/")["Contents"])
    assert listed == sorted(keys[-2:])  # the oldest beyond --keep 2 went
    body = s3.get_object(Bucket=BUCKET, Key=keys[-1])["Body"].read()
    assert body == snap.read_bytes()
    chain = backup(moto, "list", "--url", URL, "--network", "mainnet", "--all")
    assert chain.code == 0 and chain.doc["backups"] == []  # the chain's listing does not see them


def test_an_empty_or_missing_file_is_refused_in_one_line(moto: MotoProcess, tmp_path: Path) -> None:
    (tmp_path / "empty.db").write_bytes(b"")
    for path in (tmp_path / "empty.db", tmp_path / "missing.db"):
        run = backup(moto, "etcd", "--url", URL, "--file", str(path), "--keep", "2")
        assert run.code == 1
        assert run.stderr.startswith("chain-node backup etcd: ") and len(run.stderr.strip().splitlines()) == 1
    usage = backup(moto, "etcd", "--url", URL, "--file", str(tmp_path / "empty.db"))
    assert usage.code == 2 and "--keep N" in usage.stderr
