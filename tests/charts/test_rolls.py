"""What a release changes in the pod templates of the chart's StatefulSets, and who may roll them: the node pods
are held (partition = replicas) in every render with the operator on, so that only the operator releases them
(tests/operator/test_chart_rolls.py drives it); a release that changes only the chart's version changes no pod
template; a chain image bump changes the node template, never etcd's."""

from __future__ import annotations

from typing import Any

import pytest

from chain_operator.config import OperatorConfig, parse_config
from tests.charts.helm import CHART, PROFILES, RELEASE, Manifests, chart_at, render

FULL = f"{RELEASE}-chain"
TLS_SECRETS = ("node", "gateway", "operator", "backup", "envoy", "etcd", "etcdClient", "redis", "ca")
GITOPS = (
    "--set", "gitOps=true,adminToken.existingSecret=chain-admin-token,redis.auth.existingSecret=chain-redis",
    "--set", ",".join(f"tls.existingSecrets.{c}=chain-{c.lower()}-tls" for c in TLS_SECRETS),
)  # fmt: skip


def pod_template(m: Manifests, name: str) -> dict[str, Any]:
    template: dict[str, Any] = m.get("StatefulSet", name)["spec"]["template"]
    return template


@pytest.mark.parametrize("gitops", [False, True], ids=["helm", "gitops"])
@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_node_pods_are_held_for_the_operator_in_every_render(profile, gitops):
    args = (*PROFILES[profile], *(GITOPS if gitops else ()))
    for replicas in (1, 3, 5):
        if profile == "default" and replicas > 1:
            continue  # solo: one member
        sts = render(CHART, *args, "--set", f"node.replicaCount={replicas}").get("StatefulSet", f"{FULL}-node")
        assert sts["spec"]["updateStrategy"] == {"type": "RollingUpdate", "rollingUpdate": {"partition": replicas}}
    plain = render(CHART, *args, "--set", "operator.enabled=false").get("StatefulSet", f"{FULL}-node")
    assert plain["spec"]["updateStrategy"]["rollingUpdate"] == {"partition": 0}


def test_a_chart_version_bump_changes_no_pod_template_and_an_image_bump_not_etcds(tmp_path):
    args = PROFILES["replicated"]
    before = render(chart_at(tmp_path, "0.1.0", "0.1.0"), *args)
    chart_only = render(chart_at(tmp_path, "0.2.0", "0.1.0"), *args)
    image = render(chart_at(tmp_path, "0.3.0", "0.2.0"), *args)
    for name in (f"{FULL}-node", f"{FULL}-etcd"):
        assert before.get("StatefulSet", name)["metadata"]["labels"]["helm.sh/chart"] == "chain-0.1.0"
        assert chart_only.get("StatefulSet", name)["metadata"]["labels"]["helm.sh/chart"] == "chain-0.2.0"
        assert pod_template(chart_only, name) == pod_template(before, name), name
    assert pod_template(image, f"{FULL}-etcd") == pod_template(before, f"{FULL}-etcd")
    (node,) = pod_template(image, f"{FULL}-node")["spec"]["containers"]
    assert node["image"].endswith(":0.2.0")
    for template in (pod_template(before, f"{FULL}-node"), pod_template(before, f"{FULL}-etcd")):
        assert not {"helm.sh/chart", "app.kubernetes.io/version"} & set(template["metadata"]["labels"])
    (init,) = pod_template(before, f"{FULL}-etcd")["spec"]["initContainers"]
    assert init["image"] == "docker.io/library/busybox:1.37.0"
    pinned = render(CHART, *args, "--set", "etcd.initImage.digest=sha256:" + "a" * 64)
    (init,) = pod_template(pinned, f"{FULL}-etcd")["spec"]["initContainers"]
    assert init["image"] == "docker.io/library/busybox@sha256:" + "a" * 64


def test_the_operator_reads_its_rollout_settings_from_the_rendered_environment():
    def config(*args: str) -> OperatorConfig:
        m = render(CHART, *args)
        (c,) = m.get("Deployment", f"{FULL}-operator")["spec"]["template"]["spec"]["containers"]
        env = {e["name"]: e["value"] for e in c["env"] if e["name"].startswith("CHAIN_OPERATOR_ROLLOUT_")}
        return parse_config([], env)

    default = config()
    assert (default.rollout_check, default.rollout_snapshot) == (30.0, True)
    tuned = config("--set", "operator.rolloutCheck=5,operator.rolloutSnapshot=false")
    assert (tuned.rollout_check, tuned.rollout_snapshot) == (5.0, False)


REPLICAS = ("--set", "readReplicas.enabled=true", "--set-json", 'node.genesis={"chain_id": "rolls-test"}')


@pytest.mark.parametrize("gitops", [False, True], ids=["helm", "gitops"])
def test_read_replicas_are_held_for_the_operator_and_named_in_the_network(gitops):
    args = (*PROFILES["replicated"], *REPLICAS, *(GITOPS if gitops else ()))
    for count in (1, 2, 4):
        m = render(CHART, *args, "--set", f"readReplicas.replicaCount={count}")
        sts = m.get("StatefulSet", f"{FULL}-replica")
        assert sts["spec"]["updateStrategy"] == {"type": "RollingUpdate", "rollingUpdate": {"partition": count}}
        assert m.get("ChainNetwork", FULL)["spec"]["readReplicas"] == {"statefulSet": f"{FULL}-replica"}
    plain = render(CHART, *args, "--set", "operator.enabled=false").get("StatefulSet", f"{FULL}-replica")
    assert plain["spec"]["updateStrategy"]["rollingUpdate"] == {"partition": 0}
    assert "readReplicas" not in render(CHART, *PROFILES["replicated"]).get("ChainNetwork", FULL)["spec"]


def test_a_chart_version_bump_changes_no_read_replica_template(tmp_path):
    args = (*PROFILES["replicated"], *REPLICAS)
    name = f"{FULL}-replica"
    before = render(chart_at(tmp_path, "0.1.0", "0.1.0"), *args)
    chart_only = render(chart_at(tmp_path, "0.2.0", "0.1.0"), *args)
    image = render(chart_at(tmp_path, "0.3.0", "0.2.0"), *args)
    assert chart_only.get("StatefulSet", name)["metadata"]["labels"]["helm.sh/chart"] == "chain-0.2.0"
    assert pod_template(chart_only, name) == pod_template(before, name)
    assert not {"helm.sh/chart", "app.kubernetes.io/version"} & set(pod_template(before, name)["metadata"]["labels"])
    (node,) = pod_template(image, name)["spec"]["containers"]
    assert node["image"].endswith(":0.2.0")
