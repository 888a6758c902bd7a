"""The off-cluster backup CronJob as the chart renders it: its shape, the nodes' NetworkPolicy admitting it,
refused values, and its two steps (create, then prune) run as rendered against a real chain-node and a real
S3-API server (moto): over TLS with the certificates the chart generated (the node's and the job's), and in
plaintext with TLS off."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from chain.v1 import rpc_pb2
from node.envflags import env_actions, env_name
from node.server.backup.cli import PREFIX, parser
from tests.charts.helm import (
    CHART,
    PROFILES,
    RELEASE,
    ROOT,
    Manifests,
    env_of,
    helm,
    remount,
    secret_files,
    template,
)
from tests.fixtures.actors import new_account
from tests.fixtures.motoproc import MotoProcess, serving_bucket
from tests.fixtures.nodeproc import NodeProcess, NodeTLSFiles

FULL = f"{RELEASE}-chain"
BUCKET = "chain-backups"
VALUES = f"backup.enabled=true,backup.bucket={BUCKET},backup.prefix=/chart/,backup.keep=1,backup.existingSecret=s3"


def job_pod(m: Manifests) -> dict[str, Any]:
    spec = m.get("CronJob", f"{FULL}-backup")["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert isinstance(spec, dict)
    return spec


@pytest.fixture(scope="module", params=sorted(PROFILES))
def rendered(request: pytest.FixtureRequest) -> Manifests:
    return Manifests(template(*PROFILES[str(request.param)], "--set", VALUES))


def test_cronjob_shape_credentials_and_network_access(rendered):
    cron = rendered.get("CronJob", f"{FULL}-backup")
    assert cron["spec"]["concurrencyPolicy"] == "Forbid"
    pod = job_pod(rendered)
    (create,) = pod["initContainers"]
    (prune,) = pod["containers"]
    assert create["command"] == ["chain-node", "backup", "create"]
    assert prune["command"] == ["chain-node", "backup", "prune"]
    for c in (create, prune):
        env = env_of(c)
        assert env["CHAIN_BACKUP_URL"] == f"s3://{BUCKET}/chart"
        assert c["envFrom"] == [{"secretRef": {"name": "s3"}}]
        assert not [k for k in env if k.startswith("AWS_")]  # credentials only ever come from the Secret
        assert c["securityContext"]["readOnlyRootFilesystem"] is True
    # SnapshotSyncService is on the nodes' internal listener, over TLS with the job's client certificate
    create_env = env_of(create)
    assert create_env["CHAIN_BACKUP_NODE"] == f"grpcs://{FULL}-node.chain.svc:50054"
    assert create_env["CHAIN_BACKUP_CA_FILE"] == "/etc/chain/tls/ca.crt"
    assert create_env["CHAIN_BACKUP_TLS_CERT"] == "/etc/chain/tls/tls.crt"
    assert create_env["CHAIN_BACKUP_TLS_KEY"] == "/etc/chain/tls/tls.key"
    (volume,) = pod["volumes"]
    assert volume["secret"]["secretName"] == f"{FULL}-backup-tls"
    assert create["volumeMounts"] == [{"name": volume["name"], "mountPath": "/etc/chain/tls", "readOnly": True}]
    assert env_of(prune)["CHAIN_BACKUP_KEEP"] == "1"
    policy = rendered.get("NetworkPolicy", f"{FULL}-node")
    internal = next(r for r in policy["spec"]["ingress"] if {"port": "internal", "protocol": "TCP"} in r["ports"])
    labels = cron["spec"]["jobTemplate"]["spec"]["template"]["metadata"]["labels"]
    assert any(p["podSelector"]["matchLabels"].items() <= labels.items() for p in internal["from"])


def verb_env(verb: str) -> set[str]:
    (sub,) = [a for a in parser()._actions if a.dest == "verb"]
    assert sub.choices is not None
    return {env_name(PREFIX, a) for a in env_actions(sub.choices[verb])}  # type: ignore[index]


def test_every_variable_of_a_step_is_a_flag_of_its_verb(rendered):
    pod = job_pod(rendered)
    for c in (*pod["initContainers"], *pod["containers"]):
        verb = c["command"][-1]
        assert set(env_of(c)) <= verb_env(verb), (c["name"], set(env_of(c)) - verb_env(verb))


def test_no_cronjob_unless_enabled_and_a_bucket_is_required():
    assert not Manifests(template()).kind("CronJob")
    result = helm("template", RELEASE, str(CHART), "--set", "backup.enabled=true", check=False)
    assert result.returncode != 0 and "needs backup.bucket" in result.stderr
    result = helm("template", RELEASE, str(CHART), "--set", "backup.enabled=true,backup.bucket=Bad_Name", check=False)
    assert result.returncode != 0 and "/backup/bucket" in result.stderr


@pytest.fixture(scope="module")
def moto(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MotoProcess]:
    with serving_bucket(tmp_path_factory.mktemp("moto"), BUCKET) as server:
        yield server


def run_step(
    container: dict[str, Any], moto: MotoProcess, node: str, tls_dir: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """The container's command, with its rendered environment, the Secret's credentials, and the in-cluster
    addresses (the node Service, the object store, the mounted certificate files) pointed at this test's."""
    env = remount({k: str(v) for k, v in env_of(container).items()}, {"/etc/chain/tls": tls_dir or Path("/none")})
    if "CHAIN_BACKUP_NODE" in env:
        env["CHAIN_BACKUP_NODE"] = node
    env["CHAIN_BACKUP_S3_ENDPOINT"] = moto.endpoint
    command = [str(Path(sys.executable).parent / container["command"][0]), *container["command"][1:]]
    return subprocess.run(
        command, cwd=ROOT, env={**os.environ, **env, **moto.credentials.env()}, capture_output=True, text=True,
        timeout=120, check=False,
    )  # fmt: skip


@pytest.mark.parametrize("tls", [True, False], ids=["tls", "plaintext"])
def test_rendered_steps_back_up_and_prune_against_a_real_node(moto, tmp_path, tls):
    prefix = "chart-tls" if tls else "chart-plain"  # the module's bucket is shared: one prefix per run
    m = Manifests(template("--set", VALUES, "--set", f"tls.enabled={str(tls).lower()},backup.prefix={prefix}"))
    pod = job_pod(m)
    (create,) = pod["initContainers"]
    (prune,) = pod["containers"]
    files, job_dir = None, None
    if tls:  # the chart's own certificates: the node's (SANs include 127.0.0.1) and the job's client one
        node_dir = secret_files(m, f"{FULL}-node-tls", tmp_path / "node-tls")
        files = NodeTLSFiles(node_dir / "tls.crt", node_dir / "tls.key", node_dir / "ca.crt")
        job_dir = secret_files(m, f"{FULL}-backup-tls", tmp_path / "job-tls")
    node = NodeProcess(
        tmp_path / "node", "--snapshot-chunk-bytes", "4096", env={"CHAIN_NODE_METRICS_ADDR": ""}, tls=files
    )
    node.start()
    target = f"grpcs://{node.internal_target}" if tls else node.internal_target
    try:
        names = []
        for _ in range(2):
            with node.client() as c:
                new_account(c, node.authority())
                assert c.admin is not None
                c.admin.CreateSnapshot(rpc_pb2.CreateSnapshotRequest())
            made = run_step(create, moto, target, job_dir)
            assert made.returncode == 0, made.stderr
            names.append(made.stdout)
            pruned = run_step(prune, moto, target, job_dir)
            assert pruned.returncode == 0, pruned.stderr
    finally:
        node.stop()
    keys = [o["Key"] for o in moto.s3().list_objects_v2(Bucket=BUCKET, Prefix=f"{prefix}/devnet/").get("Contents", [])]
    backups = {k.split("/")[2] for k in keys}
    assert len(backups) == 1 and backups.pop() in names[1]  # keep=1: the second run pruned the first backup
    assert any(k.endswith("/manifest.pb") for k in keys)
