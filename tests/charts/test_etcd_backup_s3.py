"""The replicated profile's etcd backups with the chain's backups on: the CronJob puts its snapshot into the
chain's bucket. Its upload step, as rendered (command and environment), runs here against a moto S3 server
on a real etcd's snapshot."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.charts.helm import PROFILES, RELEASE, Manifests, env_of, template
from tests.fixtures.etcdproc import EtcdCluster
from tests.fixtures.motoproc import MotoProcess, serving_bucket
from tests.fixtures.nodeproc import ROOT

FULL = f"{RELEASE}-chain"
BUCKET = "chain-backups"


@pytest.fixture(scope="module")
def moto(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MotoProcess]:
    with serving_bucket(tmp_path_factory.mktemp("moto"), BUCKET) as server:
        yield server


@pytest.fixture(scope="module")
def etcd1(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EtcdCluster]:
    cluster = EtcdCluster(tmp_path_factory.mktemp("etcd"), size=1).start()
    try:
        yield cluster
    finally:
        cluster.stop()


def job_pod(m: Manifests) -> dict[str, Any]:
    spec = m.get("CronJob", f"{FULL}-etcd-backup")["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert isinstance(spec, dict)
    return spec


def rendered(endpoint: str, *extra: str) -> Manifests:
    chain_backup = f"backup.enabled=true,backup.bucket={BUCKET},backup.endpoint={endpoint},backup.prefix=prod"
    return Manifests(template(*PROFILES["replicated"], "--set", chain_backup, *extra))


def test_the_profile_backs_etcd_up_into_the_chain_bucket(moto: MotoProcess, etcd1: EtcdCluster, tmp_path: Path):
    m = rendered(moto.endpoint)
    pod = job_pod(m)
    assert [c["name"] for c in pod["initContainers"]] == ["snapshot", "defrag"]
    (upload,) = pod["containers"]
    assert upload["name"] == "upload"
    assert not m.kind("PersistentVolumeClaim") or f"{FULL}-etcd-backup" not in {
        o["metadata"]["name"] for o in m.kind("PersistentVolumeClaim")
    }
    assert {"name": "backup", "emptyDir": {}} in pod["volumes"]
    # the snapshot step's file, as the upload step's command reads it
    (tmp_path / "backup").mkdir()
    partial = tmp_path / "backup" / ".partial.db"
    subprocess.run(
        ["etcdctl", f"--endpoints={etcd1.endpoints[0]}", "snapshot", "save", str(partial)],
        check=True,
        capture_output=True,
    )
    assert upload["command"][:3] == ["chain-node", "backup", "etcd"]
    args = [a.replace("/backup", str(tmp_path / "backup")) for a in upload["command"][1:]]
    env = dict(os.environ, PYTHONPATH=str(ROOT), **{k: str(v) for k, v in env_of(upload).items() if isinstance(v, str)})
    env.update(moto.credentials.env())
    run = subprocess.run(
        [sys.executable, "-m", "node.server.main", *args],
        cwd=ROOT,
        check=False,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    keys = [o["Key"] for o in moto.s3().list_objects_v2(Bucket=BUCKET, Prefix="prod/etcd/devnet/")["Contents"]]
    assert len(keys) == 1 and keys[0].endswith(".db")
    assert moto.s3().get_object(Bucket=BUCKET, Key=keys[0])["Body"].read() == partial.read_bytes()


def test_without_the_chain_backups_etcd_backs_up_onto_a_volume():
    m = Manifests(template(*PROFILES["replicated"]))
    pod = job_pod(m)
    assert [c["name"] for c in pod["containers"]] == ["rotate"]
    assert pod["volumes"][0]["persistentVolumeClaim"]["claimName"] == f"{FULL}-etcd-backup"
    forced = Manifests(
        template(*PROFILES["replicated"], "--set", f"backup.enabled=true,backup.bucket={BUCKET},etcd.backup.to=volume")
    )
    assert [c["name"] for c in job_pod(forced)["containers"]] == ["rotate"]
