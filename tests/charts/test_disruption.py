"""Disruption safety of the stateless front (Envoy, gateways): PodDisruptionBudgets, spreading, the Service."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from tests.charts.helm import CHART, PROFILES, RELEASE, Manifests, env_of, helm, template

PRESTOP = CHART / "files" / "envoy-prestop.sh"

FULL = f"{RELEASE}-chain"


@pytest.fixture(scope="module", params=sorted(PROFILES))
def rendered(request) -> Manifests:
    return Manifests(template(*PROFILES[str(request.param)]))


@pytest.mark.parametrize("component", ["envoy", "gateway"])
def test_front_pods_have_a_pdb_that_selects_them(rendered, component):
    dep = rendered.get("Deployment", f"{FULL}-{component}")
    pdb = rendered.get("PodDisruptionBudget", f"{FULL}-{component}")
    assert pdb["spec"]["maxUnavailable"] == 1
    assert "minAvailable" not in pdb["spec"]
    assert pdb["spec"]["selector"]["matchLabels"] == dep["spec"]["selector"]["matchLabels"]


@pytest.mark.parametrize("component", ["envoy", "gateway"])
def test_front_pods_spread_over_hosts_and_zones_by_default(rendered, component):
    dep = rendered.get("Deployment", f"{FULL}-{component}")
    pod = dep["spec"]["template"]
    constraints = pod["spec"]["topologySpreadConstraints"]
    assert {c["topologyKey"] for c in constraints} == {"kubernetes.io/hostname", "topology.kubernetes.io/zone"}
    for c in constraints:
        assert c["whenUnsatisfiable"] == "ScheduleAnyway"  # a one-host cluster still schedules
        assert c["labelSelector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
        assert c["labelSelector"]["matchLabels"]["app.kubernetes.io/component"] == component


def test_spread_and_pdb_follow_their_values():
    custom = [{"maxSkew": 2, "topologyKey": "rack", "whenUnsatisfiable": "DoNotSchedule"}]
    m = Manifests(
        template(
            "--set-json",
            f"envoy.topologySpreadConstraints={json.dumps(custom)}",
            "--set",
            "gateway.pdb.create=false",
            "--set",
            "envoy.pdb.maxUnavailable=50%",
        )
    )
    assert m.get("Deployment", f"{FULL}-envoy")["spec"]["template"]["spec"]["topologySpreadConstraints"] == custom
    assert not [p for p in m.kind("PodDisruptionBudget") if p["metadata"]["name"] == f"{FULL}-gateway"]
    assert m.get("PodDisruptionBudget", f"{FULL}-envoy")["spec"]["maxUnavailable"] == "50%"


def test_envoy_service_declares_no_grpc_app_protocol(rendered):
    # The port serves gRPC-web over HTTP/1.1 as well as h2c: `grpc` (or h2c) would be a lie for browsers.
    svc = rendered.get("Service", f"{FULL}-envoy")
    for port in svc["spec"]["ports"]:
        assert port.get("appProtocol") in (None, "http"), port


# ---- Envoy: preStop drain, grace period, stats, ordering against the node's drain ----


def envoy_pod(m: Manifests) -> dict[str, Any]:
    pod = m.get("Deployment", f"{FULL}-envoy")["spec"]["template"]["spec"]
    assert isinstance(pod, dict)
    return pod


def test_envoy_prestop_runs_the_shipped_script_inside_the_grace_period(rendered):
    pod = envoy_pod(rendered)
    (c,) = pod["containers"]
    command = c["lifecycle"]["preStop"]["exec"]["command"]
    assert command[:2] == ["/bin/bash", "/etc/envoy/prestop.sh"]
    admin, eject, drain = (int(x) for x in command[2:])
    assert admin == 9901
    assert pod["terminationGracePeriodSeconds"] > eject + drain
    assert c["args"][c["args"].index("--drain-time-s") + 1] == str(drain)
    assert c["args"][c["args"].index("--drain-strategy") + 1] == "immediate"
    config = rendered.get("ConfigMap", f"{FULL}-envoy")["data"]
    assert config["prestop.sh"].strip() == PRESTOP.read_text().strip()
    assert {"name": "config", "mountPath": "/etc/envoy", "readOnly": True} in c["volumeMounts"]


def test_node_drain_outlasts_envoys_ejection_window(rendered):
    hc = yaml.safe_load(rendered.get("ConfigMap", f"{FULL}-envoy")["data"]["envoy.yaml"])["static_resources"][
        "clusters"
    ][0]["health_checks"][0]
    window = hc["unhealthy_threshold"] * float(hc["interval"].rstrip("s")) + float(hc["timeout"].rstrip("s"))
    sts = rendered.get("StatefulSet", f"{FULL}-node")
    (node,) = [c for c in sts["spec"]["template"]["spec"]["containers"] if c["name"] == "node"]
    drain = float(env_of(node)["CHAIN_NODE_DRAIN_SECONDS"])
    assert drain > window
    assert sts["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] > drain


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--set", "node.drainSeconds=12"], "must exceed Envoy's ejection window of 12s"),
        (["--set", "envoy.healthCheck.interval=10s"], "must exceed Envoy's ejection window of 22s"),
        (["--set", "envoy.healthCheck.timeout=2500ms,node.drainSeconds=12"], "ejection window of 12.5s"),
        (["--set", "envoy.terminationGracePeriodSeconds=55"], "must exceed envoy.drain.ejectSeconds + envoy.drain"),
    ],
)
def test_drain_orderings_that_would_cut_requests_are_refused(args, message):
    result = helm("template", RELEASE, str(CHART), *args, check=False)
    assert result.returncode != 0
    assert message in result.stderr
    # The same values with Envoy off are accepted (no ejection window to outlast).
    if "envoy.terminationGracePeriodSeconds" not in args[1]:
        assert helm("template", RELEASE, str(CHART), *args, "--set", "envoy.enabled=false", check=False).returncode == 0


def test_envoy_stats_port_is_exposed_annotated_and_admitted(rendered):
    pod = envoy_pod(rendered)
    (c,) = pod["containers"]
    assert {"name": "stats", "containerPort": 9902, "protocol": "TCP"} in c["ports"]
    annotations = rendered.get("Deployment", f"{FULL}-envoy")["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/port"] == "9902"
    assert annotations["prometheus.io/path"] == "/stats/prometheus"
    config = yaml.safe_load(rendered.get("ConfigMap", f"{FULL}-envoy")["data"]["envoy.yaml"])
    assert config["admin"]["address"]["socket_address"]["address"] == "127.0.0.1"
    (stats,) = [x for x in config["static_resources"]["listeners"] if x["name"] == "stats"]
    assert stats["address"]["socket_address"]["port_value"] == 9902
    (admin_cluster,) = [x for x in config["static_resources"]["clusters"] if x["name"] == "envoy_admin"]
    (lb,) = admin_cluster["load_assignment"]["endpoints"][0]["lb_endpoints"]
    assert lb["endpoint"]["address"]["socket_address"] == {"address": "127.0.0.1", "port_value": 9901}
    front = rendered.get("NetworkPolicy", f"{FULL}-front")
    assert any({"port": "stats", "protocol": "TCP"} in rule["ports"] for rule in front["spec"]["ingress"])
