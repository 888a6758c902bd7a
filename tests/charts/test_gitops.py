"""Rendering under GitOps (`helm template`, no cluster to look anything up in): the same values render the same
manifests, the admin token comes from a Secret the user manages, and the operator's partition is left alone."""

from __future__ import annotations

import pytest
import yaml

from tests.charts.helm import CHART, NAMESPACE, PROFILES, RELEASE, Manifests, helm

FULL = f"{RELEASE}-chain"
GITOPS = ("--set", "gitOps=true,adminToken.existingSecret=chain-admin-token")


def render(*args: str) -> str:
    return helm("template", RELEASE, str(CHART), "--namespace", NAMESPACE, *args).stdout


@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_existing_secret_renders_byte_for_byte_the_same_twice(profile):
    args = (*PROFILES[profile], "--set", "adminToken.existingSecret=chain-admin-token")
    first, second = render(*args), render(*args)
    assert first == second
    m = Manifests([d for d in yaml.safe_load_all(first) if d])
    assert not [s for s in m.kind("Secret") if s["metadata"]["name"].endswith("-admin")]  # none generated
    refs = {
        e["valueFrom"]["secretKeyRef"]["name"]
        for w in m.workloads()
        for c in w["spec"]["template"]["spec"]["containers"]
        for e in c.get("env", [])
        if "secretKeyRef" in e.get("valueFrom", {})
    }
    assert refs == {"chain-admin-token"}


def test_without_existing_secret_each_render_generates_a_token():
    # What the value is for: `helm template` cannot see the token it generated last time.
    first, second = render(), render()
    assert first != second
    differing = {
        (a["kind"], a["metadata"]["name"])
        for a, b in zip(yaml.safe_load_all(first), yaml.safe_load_all(second), strict=True)
        if a != b
    }
    assert differing == {("Secret", f"{FULL}-admin")}


@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_gitops_leaves_the_partition_to_the_operator(profile):
    out = render(*PROFILES[profile], *GITOPS)
    assert out == render(*PROFILES[profile], *GITOPS)
    sts = Manifests([d for d in yaml.safe_load_all(out) if d]).get("StatefulSet", f"{FULL}-node")
    assert sts["spec"]["updateStrategy"] == {"type": "RollingUpdate", "rollingUpdate": {}}
    # Without the operator nobody else owns the partition: it is rendered.
    plain = render(*PROFILES[profile], *GITOPS, "--set", "operator.enabled=false")
    sts = Manifests([d for d in yaml.safe_load_all(plain) if d]).get("StatefulSet", f"{FULL}-node")
    assert sts["spec"]["updateStrategy"]["rollingUpdate"] == {"partition": 0}


def test_gitops_without_an_existing_secret_is_refused():
    result = helm("template", RELEASE, str(CHART), "--set", "gitOps=true", check=False)
    assert result.returncode != 0
    assert "gitOps=true needs adminToken.existingSecret" in result.stderr
