"""Disruption safety of the stateless front (Envoy, gateways): PodDisruptionBudgets, spreading, the Service."""

from __future__ import annotations

import json

import pytest

from tests.charts.helm import PROFILES, RELEASE, Manifests, template

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
