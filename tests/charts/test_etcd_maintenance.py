"""etcd day 2 as the chart renders it: the data subdirectory (and the move of an older layout), and the backup
CronJob's steps (etcdctl snapshot save, defrag, rotate) run against a real etcd."""

from __future__ import annotations

import shutil
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.charts.helm import CHART, PROFILES, RELEASE, Manifests, env_of, helm, remount, secret_files, template
from tests.fixtures.procs import free_port, stop_process

FULL = f"{RELEASE}-chain"
BACKUP = ("--set", "etcd.backup.enabled=true,etcd.backup.retention=2")


@pytest.fixture(scope="module")
def rendered() -> Manifests:
    return Manifests(template(*PROFILES["replicated"], *BACKUP))


def etcd_pod(m: Manifests) -> dict[str, Any]:
    spec = m.get("StatefulSet", f"{FULL}-etcd")["spec"]["template"]["spec"]
    assert isinstance(spec, dict)
    return spec


def job_pod(m: Manifests) -> dict[str, Any]:
    spec = m.get("CronJob", f"{FULL}-etcd-backup")["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert isinstance(spec, dict)
    return spec


def run_sh(command: list[str], *args: str) -> subprocess.CompletedProcess[str]:
    """Run a container's `/bin/sh -c SCRIPT NAME ARGS...` command here, with ARGS replaced."""
    assert command[:2] == ["/bin/sh", "-c"]
    return subprocess.run(
        ["sh", "-c", command[2], command[3], *args], check=False, capture_output=True, text=True, timeout=30
    )


def test_etcd_data_lives_in_a_subdirectory_of_its_volume(rendered):
    pod = etcd_pod(rendered)
    (c,) = pod["containers"]
    assert env_of(c)["ETCD_DATA_DIR"] == "/var/lib/etcd/data"
    assert {"name": "data", "mountPath": "/var/lib/etcd"} in c["volumeMounts"]
    (init,) = pod["initContainers"]
    assert init["command"][-1] == "/var/lib/etcd"
    assert {"name": "data", "mountPath": "/var/lib/etcd"} in init["volumeMounts"]


def test_init_container_moves_an_older_layout_once(rendered, tmp_path):
    (init,) = etcd_pod(rendered)["initContainers"]
    old = tmp_path / "old"
    (old / "member" / "snap").mkdir(parents=True)
    (old / "member" / "snap" / "db").write_bytes(b"keyspace")
    (old / "lost+found").mkdir()
    result = run_sh(init["command"], str(old))
    assert result.returncode == 0, result.stderr
    assert (old / "data" / "member" / "snap" / "db").read_bytes() == b"keyspace"
    assert not (old / "member").exists()
    assert (old / "data").stat().st_mode & 0o777 == 0o700
    # Again (a restart): nothing moves, nothing is lost.
    assert run_sh(init["command"], str(old)).returncode == 0
    assert (old / "data" / "member" / "snap" / "db").read_bytes() == b"keyspace"
    # A fresh volume gets an empty data directory for etcd to initialise.
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    assert run_sh(init["command"], str(fresh)).returncode == 0
    assert list((fresh / "data").iterdir()) == []


def test_backup_cronjob_shape_and_network_access(rendered):
    cron = rendered.get("CronJob", f"{FULL}-etcd-backup")
    assert cron["spec"]["concurrencyPolicy"] == "Forbid"
    pod = job_pod(rendered)
    assert [c["name"] for c in pod["initContainers"]] == ["snapshot", "defrag"]
    assert pod["volumes"][0]["persistentVolumeClaim"]["claimName"] == f"{FULL}-etcd-backup"
    assert pod["volumes"][1]["secret"]["secretName"] == f"{FULL}-etcd-client-tls"  # TLS on: etcdctl's certificate
    claim = rendered.get("PersistentVolumeClaim", f"{FULL}-etcd-backup")
    assert claim["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    for c in pod["initContainers"] + pod["containers"]:
        assert c["securityContext"]["readOnlyRootFilesystem"] is True
    labels = cron["spec"]["jobTemplate"]["spec"]["template"]["metadata"]["labels"]
    policy = rendered.get("NetworkPolicy", f"{FULL}-etcd")
    (client,) = [r for r in policy["spec"]["ingress"] if r["ports"][0]["port"] == "client"]
    assert any(p["podSelector"]["matchLabels"].items() <= labels.items() for p in client["from"])
    # On in the replicated profile (with its defrag step), off when asked, and no defrag step when asked not to.
    profile = Manifests(template(*PROFILES["replicated"]))
    assert [c["name"] for c in job_pod(profile)["initContainers"]] == ["snapshot", "defrag"]
    assert not Manifests(template(*PROFILES["replicated"], "--set", "etcd.backup.enabled=false")).kind("CronJob")
    quiet = Manifests(template(*PROFILES["replicated"], *BACKUP, "--set", "etcd.backup.defrag=false"))
    assert [c["name"] for c in job_pod(quiet)["initContainers"]] == ["snapshot"]
    existing = Manifests(template(*PROFILES["replicated"], *BACKUP, "--set", "etcd.backup.existingClaim=backups"))
    assert not existing.kind("PersistentVolumeClaim")
    assert job_pod(existing)["volumes"][0]["persistentVolumeClaim"]["claimName"] == "backups"


@dataclass(frozen=True)
class LocalEtcd:
    """An etcd started with the environment the chart renders for its container (TLS and its certificates
    from the chart when on), its URLs moved to free local ports; the backup job's steps and certificate."""

    url: str
    job: dict[str, dict[str, Any]]
    job_tls: Path | None


@pytest.fixture(params=[True, False], ids=["tls", "plaintext"])
def etcd(request, tmp_path) -> Iterator[LocalEtcd]:
    tls = bool(request.param)
    m = Manifests(template(*PROFILES["replicated"], *BACKUP, "--set", f"tls.enabled={str(tls).lower()}"))
    (container,) = etcd_pod(m)["containers"]
    env = {k: str(v) for k, v in env_of(container).items() if isinstance(v, str)}
    scheme = "https" if tls else "http"
    assert env["ETCD_LISTEN_CLIENT_URLS"].startswith(f"{scheme}://")
    client, peer, metrics = free_port(), free_port(), free_port()
    server_tls = secret_files(m, f"{FULL}-etcd-tls", tmp_path / "etcd-tls") if tls else Path("/none")
    env = remount(env, {"/etc/etcd/tls": server_tls})
    url = f"{scheme}://127.0.0.1:{client}"
    env.update(
        ETCD_NAME="e0", ETCD_DATA_DIR=str(tmp_path / "etcd" / "data"),
        ETCD_LISTEN_CLIENT_URLS=url, ETCD_ADVERTISE_CLIENT_URLS=url,
        ETCD_LISTEN_PEER_URLS=f"{scheme}://127.0.0.1:{peer}",
        ETCD_INITIAL_ADVERTISE_PEER_URLS=f"{scheme}://127.0.0.1:{peer}",
        ETCD_INITIAL_CLUSTER=f"e0={scheme}://127.0.0.1:{peer}",
        ETCD_LISTEN_METRICS_URLS=f"http://127.0.0.1:{metrics}",
    )  # fmt: skip
    proc = subprocess.Popen(["etcd"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:  # the metrics listener's /health: what the probes use with TLS on (no client certificate)
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{metrics}/health", timeout=2) as resp:
                    if b"true" in resp.read():
                        break
            except OSError:
                pass
            assert proc.poll() is None, "etcd exited: the rendered environment does not start it"
            assert time.monotonic() < deadline, "etcd never became healthy"
            time.sleep(0.2)
        pod = job_pod(m)
        job_tls = secret_files(m, f"{FULL}-etcd-client-tls", tmp_path / "job-tls") if tls else None
        yield LocalEtcd(url, {c["name"]: c for c in pod["initContainers"] + pod["containers"]}, job_tls)
    finally:
        stop_process(proc, 10)


def etcdctl(args: list[str], endpoint: str, backup: Path, tls: Path | None) -> subprocess.CompletedProcess[str]:
    """A step's etcdctl arguments, with the in-cluster endpoints and the /backup and certificate mounts pointed
    here."""
    local = [
        f"--endpoints={endpoint}"
        if a.startswith("--endpoints=")
        else a.replace("/etc/etcd/tls", str(tls or "/none")).replace("/backup", str(backup))
        for a in args
    ]
    assert shutil.which("etcdctl"), "etcdctl is missing: Debian package etcd-client (make install-test)"
    return subprocess.run(["etcdctl", *local], check=False, capture_output=True, text=True, timeout=60)


def test_backup_steps_against_a_real_etcd(etcd, tmp_path):
    steps = etcd.job
    backup = tmp_path / "backup"
    backup.mkdir()
    # etcd requires a client certificate with TLS on: the job's, from the chart, and nothing less
    certificate = [a for a in steps["snapshot"]["args"] if "/etc/etcd/tls/" in a]
    put = etcdctl(["--endpoints=", *certificate, "put", "/chain/k", "v"], etcd.url, backup, etcd.job_tls)
    assert put.returncode == 0, put.stderr
    if etcd.job_tls is not None:
        bare = etcdctl(["--endpoints=", f"--cacert={etcd.job_tls}/ca.crt", "get", "/chain/k"], etcd.url, backup, None)
        assert bare.returncode != 0
    saved = []
    for _ in range(3):
        for name in ("snapshot", "defrag"):
            result = etcdctl(steps[name]["args"], etcd.url, backup, etcd.job_tls)
            assert result.returncode == 0, (name, result.stdout, result.stderr)
        rotate = steps["rotate"]["command"]
        assert rotate[-2:] == ["/backup", "2"]
        result = run_sh(rotate[:4], str(backup), "2")
        assert result.returncode == 0, result.stderr
        saved.append(result.stdout.split()[1])
        time.sleep(1.1)  # snapshots are named by the second
    kept = sorted(p.name for p in backup.iterdir())
    assert kept == sorted(Path(s).name for s in saved[1:]), kept  # retention 2: the oldest went
    status = subprocess.run(
        ["etcdctl", "snapshot", "status", str(backup / kept[-1]), "-w", "json"],
        check=False,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert status.returncode == 0 and '"totalKey"' in status.stdout, status.stdout + status.stderr
    # A run whose snapshot step failed leaves nothing to rotate: the step fails rather than keep garbage.
    failed = run_sh(rotate[:4], str(backup), "2")
    assert failed.returncode != 0 and "no snapshot" in failed.stderr
    assert sorted(p.name for p in backup.iterdir()) == kept


def initial_state(m: Manifests) -> str:
    """ETCD_INITIAL_CLUSTER_STATE as a member starting now reads it: from the operator's ConfigMap."""
    (c,) = etcd_pod(m)["containers"]
    ref = env_of(c)["ETCD_INITIAL_CLUSTER_STATE"]["configMapKeyRef"]
    state = m.get("ConfigMap", ref["name"])["data"][ref["key"]]
    assert isinstance(state, str)
    return state


def test_initial_cluster_state_is_new_unless_a_replaced_member_joins(rendered):
    """docs/operations.md "Replace an etcd member": a member re-added with etcdctl member add starts on an
    empty volume with state existing; the first install bootstraps with new; nothing else is accepted."""
    assert initial_state(rendered) == "new"
    joining = Manifests(template(*PROFILES["replicated"], "--set", "etcd.initialClusterState=existing"))
    assert initial_state(joining) == "existing"
    # without the operator, the StatefulSet carries the values itself
    alone = Manifests(template(*PROFILES["replicated"], "--set", "operator.enabled=false"))
    (c,) = etcd_pod(alone)["containers"]
    assert env_of(c)["ETCD_INITIAL_CLUSTER_STATE"] == "new"
    refused = helm(
        "template", RELEASE, str(CHART), *PROFILES["replicated"], "--set", "etcd.initialClusterState=join", check=False
    )
    assert refused.returncode != 0 and "initialClusterState" in refused.stderr
