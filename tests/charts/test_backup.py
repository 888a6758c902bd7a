"""The off-cluster backup CronJob as the chart renders it: its shape, the nodes' NetworkPolicy admitting it,
refused values, and its two steps (create, then prune) run as rendered against a real chain-node and a real
S3-API server (moto)."""

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
from tests.charts.helm import CHART, PROFILES, RELEASE, ROOT, Manifests, env_of, helm, template
from tests.fixtures.actors import new_account
from tests.fixtures.motoproc import MotoProcess
from tests.fixtures.nodeproc import NodeProcess

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
    assert env_of(create)["CHAIN_BACKUP_NODE"] == f"{FULL}-node.chain.svc:50051"
    assert env_of(prune)["CHAIN_BACKUP_KEEP"] == "1"
    policy = rendered.get("NetworkPolicy", f"{FULL}-node")
    grpc_rule = next(r for r in policy["spec"]["ingress"] if {"port": "grpc", "protocol": "TCP"} in r["ports"])
    labels = cron["spec"]["jobTemplate"]["spec"]["template"]["metadata"]["labels"]
    assert any(p["podSelector"]["matchLabels"].items() <= labels.items() for p in grpc_rule["from"])


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
    server = MotoProcess(tmp_path_factory.mktemp("moto")).start()
    try:
        server.s3().create_bucket(Bucket=BUCKET)
        yield server
    finally:
        server.stop()


def run_step(container: dict[str, Any], moto: MotoProcess, node: str) -> subprocess.CompletedProcess[str]:
    """The container's command, with its rendered environment, the Secret's credentials, and the in-cluster
    addresses (the node Service, the object store) pointed at the processes of this test."""
    env = {k: str(v) for k, v in env_of(container).items()}
    if "CHAIN_BACKUP_NODE" in env:
        env["CHAIN_BACKUP_NODE"] = node
    env["CHAIN_BACKUP_S3_ENDPOINT"] = moto.endpoint
    command = [str(Path(sys.executable).parent / container["command"][0]), *container["command"][1:]]
    return subprocess.run(
        command, cwd=ROOT, env={**os.environ, **env, **moto.credentials.env()}, capture_output=True, text=True,
        timeout=120, check=False,
    )  # fmt: skip


def test_rendered_steps_back_up_and_prune_against_a_real_node(moto, tmp_path):
    pod = job_pod(Manifests(template("--set", VALUES)))
    (create,) = pod["initContainers"]
    (prune,) = pod["containers"]
    node = NodeProcess(tmp_path / "node", "--snapshot-chunk-bytes", "4096", env={"CHAIN_NODE_METRICS_ADDR": ""})
    node.start()
    try:
        names = []
        for _ in range(2):
            with node.client() as c:
                new_account(c, node.authority())
                assert c.admin is not None
                c.admin.CreateSnapshot(rpc_pb2.CreateSnapshotRequest())
            made = run_step(create, moto, node.grpc_target)
            assert made.returncode == 0, made.stderr
            names.append(made.stdout)
            pruned = run_step(prune, moto, node.grpc_target)
            assert pruned.returncode == 0, pruned.stderr
    finally:
        node.stop()
    keys = [o["Key"] for o in moto.s3().list_objects_v2(Bucket=BUCKET, Prefix="chart/devnet/").get("Contents", [])]
    backups = {k.split("/")[2] for k in keys}
    assert len(backups) == 1 and backups.pop() in names[1]  # keep=1: the second run pruned the first backup
    assert any(k.endswith("/manifest.pb") for k in keys)
