"""The gateways balance over every ready node: the chart hands each gateway a `dns:///` name
of a headless Service of ready node pods, and the gateway's channels balance with gRPC's round_robin."""

from __future__ import annotations

import pytest

from gateway.upstream.pool import DNS_CHANNEL_OPTIONS, DNS_SCHEME
from node.tls import parse_target
from tests.charts.helm import NAMESPACE, PROFILES, RELEASE, Manifests, env_of, template

FULL = f"{RELEASE}-chain"


@pytest.fixture(scope="module", params=sorted(PROFILES))
def rendered(request: pytest.FixtureRequest) -> Manifests:
    return Manifests(template(*PROFILES[request.param]))


def test_gateway_dials_the_ready_nodes_headless_service_by_dns(rendered: Manifests) -> None:
    gw = rendered.get("Deployment", f"{FULL}-gateway")
    (c,) = gw["spec"]["template"]["spec"]["containers"]
    target = parse_target(env_of(c)["CHAIN_GATEWAY_NODE_ADDR"])
    assert target.secure  # TLS on by default: grpcs://dns:///...
    addr = target.address
    assert addr.startswith(DNS_SCHEME), addr
    host, port = addr.removeprefix(DNS_SCHEME).rsplit(":", 1)
    name, namespace, svc = host.split(".")
    assert (namespace, svc) == (NAMESPACE, "svc")
    service = rendered.get("Service", name)
    assert service["spec"]["clusterIP"] == "None"  # headless: one DNS record per node pod, not one virtual IP
    assert service["spec"]["publishNotReadyAddresses"] is False  # reads never go to a node that is not ready
    assert [int(p["port"]) for p in service["spec"]["ports"] if p["name"] == "grpc"] == [int(port)]
    sts = rendered.get("StatefulSet", f"{FULL}-node")
    assert service["spec"]["selector"] == sts["spec"]["selector"]["matchLabels"]
    assert c["readinessProbe"]["httpGet"]["path"] == "/v1/health"
    # the internal listener (read batches) through the same ready-only Service
    internal = parse_target(env_of(c)["CHAIN_GATEWAY_NODE_INTERNAL_ADDR"])
    assert internal.secure and internal.address == f"{DNS_SCHEME}{host}:50054"
    assert [p["port"] for p in service["spec"]["ports"] if p["name"] == "internal"] == [50054]


def test_gateway_channels_balance_round_robin() -> None:
    assert dict(DNS_CHANNEL_OPTIONS)["grpc.lb_policy_name"] == "round_robin"  # not pick_first: all records used
