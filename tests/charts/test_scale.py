"""Scaling the chart out (docs/deploy.md "Read replicas", "Gateway scaling", "Priority and placement"), rendered by
the real helm: read replicas behind the gateways and Envoy, the gateway HPA on open connections with CPU beside it
and a preStop before SIGTERM, priority classes, anti-affinity soft or hard, zone spread, and an etcd PDB that never
blocks a single member's drain."""

from __future__ import annotations

import base64
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509

from node.server.config import _parser as node_parser
from tests.charts.helm import CHART, NAMESPACE, PROFILES, RELEASE, ROOT, Manifests, env_of, helm, template
from tests.fixtures.envoyproc import EdgeTLS

FULL = f"{RELEASE}-chain"
NODE, REPLICA = f"{FULL}-node", f"{FULL}-replica"
REPLICAS = ("--set", "readReplicas.enabled=true", "--set-json", 'node.genesis={"chain_id": "scale-test"}')
# what only a member has (the ordering, state sync, the AdminService) and what only a replica has
MEMBER_ONLY = {
    "CHAIN_NODE_ADMIN_TOKEN", "CHAIN_NODE_ORDERER", "CHAIN_NODE_ETCD_ENDPOINTS", "CHAIN_NODE_ETCD_PREFIX",
    "CHAIN_NODE_NODE_ID", "CHAIN_NODE_ADVERTISE_ADDR", "CHAIN_NODE_RESTORE_TIMEOUT", "CHAIN_NODE_SNAPSHOT_CHUNK_BYTES",
    "CHAIN_NODE_STATE_SYNC_RATE", "CHAIN_NODE_ETCD_CA_FILE", "CHAIN_NODE_ETCD_CERT", "CHAIN_NODE_ETCD_KEY",
    "CHAIN_NODE_BLOCK_INTERVAL", "CHAIN_NODE_EMPTY_BLOCK_INTERVAL",
}  # fmt: skip
REPLICA_ONLY = {"CHAIN_NODE_FOLLOW", "CHAIN_NODE_MAX_LAG_BLOCKS"}
ENVOY = ROOT / ".venv" / "bin" / "envoy"


@pytest.fixture(scope="module", params=sorted(PROFILES))
def profile(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="module")
def with_replicas(profile: str) -> Manifests:
    return Manifests(template(*PROFILES[profile], *REPLICAS))


def pod(m: Manifests, kind: str, name: str) -> dict[str, Any]:
    spec = m.get(kind, name)["spec"]["template"]["spec"]
    assert isinstance(spec, dict)
    return spec


def container(m: Manifests, kind: str, name: str, c: str) -> dict[str, Any]:
    (found,) = [x for x in pod(m, kind, name)["containers"] if x["name"] == c]
    assert isinstance(found, dict)
    return found


def flags(parser: Any, prefix: str) -> set[str]:
    return {
        prefix + a.option_strings[0].lstrip("-").replace("-", "_").upper()
        for a in parser()._actions
        if a.option_strings and a.dest != "help"
    }


# ---- read replicas ----


def test_read_replicas_follow_the_node_service_over_mutual_tls_with_the_nodes_flags(with_replicas: Manifests) -> None:
    m = with_replicas
    sts = m.get("StatefulSet", REPLICA)
    assert sts["spec"]["replicas"] == 2
    assert sts["spec"]["serviceName"] == REPLICA
    node_env = env_of(container(m, "StatefulSet", NODE, "node"))
    env = env_of(container(m, "StatefulSet", REPLICA, "node"))
    # the node Service (ready members only), its internal listener, which takes a certificate of the cluster CA
    assert env["CHAIN_NODE_FOLLOW"] == f"{NODE}.{NAMESPACE}.svc:50054"
    assert env["CHAIN_NODE_ADMIN_ADDR"] == ""  # no AdminService on a replica
    assert env["CHAIN_NODE_GENESIS"] == "/etc/chain/genesis/genesis.json"
    assert "CHAIN_NODE_ORDERER" not in env and "CHAIN_NODE_ETCD_ENDPOINTS" not in env
    # the node's flags: every setting they share has the node's value (so the two cannot drift apart)
    shared = (set(node_env) - MEMBER_ONLY) - {"CHAIN_NODE_ADMIN_ADDR"}
    assert set(env) - REPLICA_ONLY - {"CHAIN_NODE_ADMIN_ADDR"} == shared
    assert {k: env[k] for k in shared} == {k: node_env[k] for k in shared}
    assert {k for k in env if k.startswith("CHAIN_")} <= flags(node_parser, "CHAIN_NODE_")
    assert env["CHAIN_NODE_TLS_CERT"] == "/etc/chain/tls/tls.crt"  # mutual TLS to the internal listener
    # the nodes' certificate (serverAuth + clientAuth), the nodes' image, resources and probes
    volumes = {v["name"]: v for v in pod(m, "StatefulSet", REPLICA)["volumes"]}
    node_volumes = {v["name"]: v for v in pod(m, "StatefulSet", NODE)["volumes"]}
    assert volumes["tls"]["secret"]["secretName"] == node_volumes["tls"]["secret"]["secretName"] == f"{NODE}-tls"
    replica_c, node_c = container(m, "StatefulSet", REPLICA, "node"), container(m, "StatefulSet", NODE, "node")
    for key in ("image", "resources", "readinessProbe", "startupProbe", "livenessProbe", "securityContext"):
        assert replica_c[key] == node_c[key], key
    assert (
        sts["spec"]["volumeClaimTemplates"][0]["spec"]
        == m.get("StatefulSet", NODE)["spec"]["volumeClaimTemplates"][0]["spec"]
    )


def test_the_nodes_certificate_carries_the_names_the_replicas_are_dialled_by(with_replicas: Manifests) -> None:
    secret = with_replicas.get("Secret", f"{NODE}-tls")
    cert = x509.load_pem_x509_certificate(base64.b64decode(secret["data"]["tls.crt"]))
    dns = set(
        cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(x509.DNSName)
    )
    assert f"{REPLICA}.{NAMESPACE}.svc" in dns  # the gateways' dns:/// name of the replicas
    assert f"{NODE}.{NAMESPACE}.svc" in dns  # what the replicas dial
    usages = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH in usages and x509.oid.ExtendedKeyUsageOID.SERVER_AUTH in usages


def test_gateways_and_envoy_send_reads_to_the_replicas_too(with_replicas: Manifests) -> None:
    m = with_replicas
    env = env_of(container(m, "Deployment", f"{FULL}-gateway", "gateway"))
    replicas = f"grpcs://dns:///{REPLICA}.{NAMESPACE}.svc"
    assert env["CHAIN_GATEWAY_NODE_ADDR"].split(",") == [
        f"grpcs://dns:///{FULL}-gateway-nodes.{NAMESPACE}.svc:50051",
        f"{replicas}:50051",
    ]
    assert env["CHAIN_GATEWAY_NODE_INTERNAL_ADDR"].split(",")[1] == f"{replicas}:50054"
    service = m.get("Service", REPLICA)
    assert service["spec"]["clusterIP"] == "None" and service["spec"]["publishNotReadyAddresses"] is False
    assert service["spec"]["selector"] == m.get("StatefulSet", REPLICA)["spec"]["selector"]["matchLabels"]
    exposed = {p["name"] for p in container(m, "StatefulSet", REPLICA, "node")["ports"]}
    assert {p["targetPort"] for p in service["spec"]["ports"]} <= exposed
    envoy = yaml.safe_load(m.get("ConfigMap", f"{FULL}-envoy")["data"]["envoy.yaml"])
    (cluster,) = [c for c in envoy["static_resources"]["clusters"] if c["name"] == "chain_node"]
    addresses = [
        e["endpoint"]["address"]["socket_address"]["address"]
        for group in cluster["load_assignment"]["endpoints"]
        for e in group["lb_endpoints"]
    ]
    assert addresses == [f"{NODE}-headless.{NAMESPACE}.svc.cluster.local", f"{REPLICA}.{NAMESPACE}.svc.cluster.local"]


def test_replicas_have_their_pdb_and_network_policy(with_replicas: Manifests) -> None:
    m = with_replicas
    pdb = m.get("PodDisruptionBudget", REPLICA)
    assert pdb["spec"]["maxUnavailable"] == 1
    assert pdb["spec"]["selector"] == m.get("StatefulSet", REPLICA)["spec"]["selector"]
    # the node's internal listener admits the replicas (they follow it and forward writes there)
    rules = {tuple(p["port"] for p in r["ports"]): r for r in m.get("NetworkPolicy", NODE)["spec"]["ingress"]}
    internal_from = {
        p["podSelector"]["matchLabels"]["app.kubernetes.io/component"] for p in rules[("internal",)]["from"]
    }
    assert "replica" in internal_from
    own = m.get("NetworkPolicy", REPLICA)["spec"]["ingress"]
    ports = {p["port"] for r in own for p in r["ports"]}
    assert "admin" not in ports and {"grpc", "internal"} <= ports


def test_no_replicas_by_default_and_none_without_a_genesis() -> None:
    m = Manifests(template())
    assert not [d for d in m.docs if d["metadata"]["name"] == REPLICA]
    assert "replica" not in env_of(container(m, "Deployment", f"{FULL}-gateway", "gateway"))["CHAIN_GATEWAY_NODE_ADDR"]
    refused = helm("template", RELEASE, str(CHART), "--set", "readReplicas.enabled=true", check=False)
    assert refused.returncode != 0 and "readReplicas.enabled needs node.genesis" in refused.stderr


# ---- the gateway: HPA, preStop ----


def test_gateway_hpa_scales_on_cpu_by_default_and_on_connections_when_asked() -> None:
    cpu = Manifests(template()).get("HorizontalPodAutoscaler", f"{FULL}-gateway")["spec"]
    assert [x["type"] for x in cpu["metrics"]] == ["Resource"]
    m = Manifests(template("--set", "gateway.autoscaling.metric=connections"))
    spec = m.get("HorizontalPodAutoscaler", f"{FULL}-gateway")["spec"]
    pods_metric, resource = spec["metrics"]
    assert resource == {
        "type": "Resource",
        "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 70}},
    }
    assert pods_metric["pods"]["metric"]["name"] == "chain_http_connections"  # what the gateway serves
    cap = int(env_of(container(m, "Deployment", f"{FULL}-gateway", "gateway"))["CHAIN_GATEWAY_MAX_CONNECTIONS"])
    assert pods_metric["pods"]["target"] == {"type": "AverageValue", "averageValue": str(int(cap * 0.6))}
    # scale-in ends streams: one pod a minute, after five minutes of lower load
    assert spec["behavior"]["scaleDown"]["policies"] == [{"type": "Pods", "value": 1, "periodSeconds": 60}]


def test_gateway_pods_wait_before_sigterm_within_their_grace() -> None:
    m = Manifests(template())
    spec = pod(m, "Deployment", f"{FULL}-gateway")
    c = container(m, "Deployment", f"{FULL}-gateway", "gateway")
    assert c["lifecycle"]["preStop"]["exec"]["command"] == ["sleep", "10"]
    assert spec["terminationGracePeriodSeconds"] == 30
    refused = helm("template", RELEASE, str(CHART), "--set", "gateway.preStopSeconds=26", check=False)
    assert refused.returncode != 0 and "must be at least gateway.preStopSeconds + 5" in refused.stderr
    off = Manifests(template("--set", "gateway.preStopSeconds=0"))
    assert "lifecycle" not in container(off, "Deployment", f"{FULL}-gateway", "gateway")


# ---- priority and placement ----


def test_priority_classes_reach_nodes_replicas_etcd_and_gateways() -> None:
    args = [f"--set={c}.priorityClassName=chain-{c}" for c in ("node", "etcd", "gateway", "readReplicas")]
    m = Manifests(template(*PROFILES["replicated"], *REPLICAS, *args))
    for kind, name, c in (
        ("StatefulSet", NODE, "node"), ("StatefulSet", f"{FULL}-etcd", "etcd"),
        ("Deployment", f"{FULL}-gateway", "gateway"), ("StatefulSet", REPLICA, "readReplicas"),
    ):  # fmt: skip
        assert pod(m, kind, name)["priorityClassName"] == f"chain-{c}", name
    assert "priorityClassName" not in pod(Manifests(template()), "StatefulSet", NODE)


def anti_affinity(spec: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    ((mode, terms),) = spec["affinity"]["podAntiAffinity"].items()
    (term,) = terms
    return mode, term.get("podAffinityTerm", term)


@pytest.mark.parametrize(("args", "node_mode", "etcd_mode"), [
    ([], "preferred", "required"),  # the replicated profile: etcd members never share a host
    (["--set", "node.antiAffinity=hard"], "required", "required"),
    (["--set", "etcd.antiAffinity=soft"], "preferred", "preferred"),
])  # fmt: skip
def test_anti_affinity_soft_or_hard_and_a_spread_over_zones(args: list[str], node_mode: str, etcd_mode: str) -> None:
    m = Manifests(template(*PROFILES["replicated"], *args))
    for name, mode in ((NODE, node_mode), (f"{FULL}-etcd", etcd_mode)):
        spec = pod(m, "StatefulSet", name)
        found, term = anti_affinity(spec)
        assert found.startswith(mode), (name, found)
        assert term["topologyKey"] == "kubernetes.io/hostname"
        own = m.get("StatefulSet", name)["spec"]["selector"]["matchLabels"]
        assert term["labelSelector"]["matchLabels"] == own
        (spread,) = spec["topologySpreadConstraints"]
        assert spread["topologyKey"] == "topology.kubernetes.io/zone"
        assert spread["whenUnsatisfiable"] == "ScheduleAnyway" and spread["labelSelector"]["matchLabels"] == own


def test_a_given_affinity_or_spread_wins() -> None:
    affinity: dict[str, Any] = {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}
    }
    spread = [{"maxSkew": 2, "topologyKey": "rack", "whenUnsatisfiable": "DoNotSchedule"}]
    given = ("--set-json", f"node.affinity={json.dumps(affinity)}")
    m = Manifests(template(*given, "--set-json", f"node.topologySpreadConstraints={json.dumps(spread)}"))
    spec = pod(m, "StatefulSet", NODE)
    assert spec["affinity"] == affinity and spec["topologySpreadConstraints"] == spread


@pytest.mark.parametrize(
    ("members", "budget"), [(1, {"maxUnavailable": 1}), (3, {"minAvailable": 2}), (5, {"minAvailable": 3})]
)
def test_the_etcd_pdb_keeps_quorum_and_never_blocks_a_single_members_drain(
    members: int, budget: dict[str, int]
) -> None:
    m = Manifests(template(*PROFILES["replicated"], "--set", f"etcd.replicaCount={members}"))
    spec = m.get("PodDisruptionBudget", f"{FULL}-etcd")["spec"]
    assert {k: v for k, v in spec.items() if k != "selector"} == budget


def test_envoy_accepts_the_configuration_with_replicas(tmp_path: Path) -> None:
    data = Manifests(template(*REPLICAS)).get("ConfigMap", f"{FULL}-envoy")["data"]
    files = {name: yaml.safe_load(text) for name, text in data.items() if name.endswith(".yaml")}
    pem = tmp_path / "tls.pem"
    pem.write_text("-----BEGIN CERTIFICATE-----\n")
    config = EdgeTLS(pem, pem, pem).install(files.pop("envoy.yaml"), files, tmp_path / "sds")
    path = tmp_path / "envoy.yaml"
    path.write_text(yaml.safe_dump(config))
    result = subprocess.run(
        [str(ENVOY), "--mode", "validate", "-c", str(path)], check=False, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
