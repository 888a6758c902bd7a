"""Rendering under GitOps (`helm template`, no cluster to look anything up in): the same values render the same
manifests, the admin token, the Redis password and the TLS certificates come from Secrets the user manages, and
the node pods are held for the operator as under helm."""

from __future__ import annotations

import pytest
import yaml

from tests.charts.helm import CHART, NAMESPACE, PROFILES, RELEASE, Manifests, helm

FULL = f"{RELEASE}-chain"
TLS_SECRETS = ("node", "gateway", "operator", "backup", "envoy", "etcd", "etcdClient", "redis", "ca")
# Every Secret a render would otherwise generate, named instead (what a GitOps repository holds)
MANAGED = (
    "--set", "adminToken.existingSecret=chain-admin-token,redis.auth.existingSecret=chain-redis",
    "--set", ",".join(f"tls.existingSecrets.{c}=chain-{c.lower()}-tls" for c in TLS_SECRETS),
)  # fmt: skip
GITOPS = ("--set", "gitOps=true", *MANAGED)


def render(*args: str) -> str:
    return helm("template", RELEASE, str(CHART), "--namespace", NAMESPACE, *args).stdout


@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_existing_secret_renders_byte_for_byte_the_same_twice(profile):
    args = (*PROFILES[profile], *MANAGED)
    first, second = render(*args), render(*args)
    assert first == second
    m = Manifests([d for d in yaml.safe_load_all(first) if d])
    assert not m.kind("Secret")  # none generated
    refs = {
        e["valueFrom"]["secretKeyRef"]["name"]
        for w in m.workloads()
        for c in w["spec"]["template"]["spec"]["containers"]
        for e in c.get("env", [])
        if "secretKeyRef" in e.get("valueFrom", {})
    }
    assert refs == {"chain-admin-token"}


def test_without_existing_secret_each_render_generates_a_token():
    # What the values are for: `helm template` cannot see the token, password or CA it generated last time.
    first, second = render(), render()
    assert first != second
    differing = {
        (a["kind"], a["metadata"]["name"])
        for a, b in zip(yaml.safe_load_all(first), yaml.safe_load_all(second), strict=True)
        if a != b
    }
    generated = {f"{FULL}-admin", f"{FULL}-redis-auth", f"{FULL}-ca-key", f"{FULL}-ca"}
    generated |= {f"{FULL}-{c}-tls" for c in ("node", "gateway", "operator", "envoy", "redis")}
    assert differing == {("Secret", name) for name in generated}


@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_gitops_holds_every_node_pod_for_the_operator(profile):
    out = render(*PROFILES[profile], *GITOPS)
    assert out == render(*PROFILES[profile], *GITOPS)
    sts = Manifests([d for d in yaml.safe_load_all(out) if d]).get("StatefulSet", f"{FULL}-node")
    replicas = sts["spec"]["replicas"]
    assert sts["spec"]["updateStrategy"] == {"type": "RollingUpdate", "rollingUpdate": {"partition": replicas}}
    # Without the operator nobody releases pods: the StatefulSet controller rolls them itself.
    plain = render(*PROFILES[profile], *GITOPS, "--set", "operator.enabled=false")
    sts = Manifests([d for d in yaml.safe_load_all(plain) if d]).get("StatefulSet", f"{FULL}-node")
    assert sts["spec"]["updateStrategy"]["rollingUpdate"] == {"partition": 0}


@pytest.mark.parametrize(
    ("unset", "message"),
    [
        ("adminToken.existingSecret", "gitOps=true needs adminToken.existingSecret"),
        ("redis.auth.existingSecret", "gitOps=true with redis.auth.enabled needs redis.auth.existingSecret"),
        ("tls.existingSecrets.gateway", "set tls.existingSecrets.gateway"),
        ("tls.existingSecrets.ca", "set tls.existingSecrets.ca"),
    ],
)
def test_gitops_without_an_existing_secret_is_refused(unset, message):
    result = helm("template", RELEASE, str(CHART), *GITOPS, "--set", f"{unset}=", check=False)
    assert result.returncode != 0
    assert message in result.stderr
