"""The Helm chart, rendered by the real helm binary for the default and the replicated profile."""

from __future__ import annotations

import base64
import json
import re
import shutil
import subprocess
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import pytest
import yaml

from chain_operator.config import _parser as operator_parser
from chain_operator.spec import parse_spec
from gateway.config import _parser as gateway_parser
from node.server.config import _parser as node_parser
from tests.charts.helm import CHART, NAMESPACE, PROFILES, RELEASE, ROOT, Manifests, env_of, helm, template

FULL = f"{RELEASE}-chain"
NODE, HEADLESS = f"{FULL}-node", f"{FULL}-node-headless"


@pytest.fixture(scope="module", params=sorted(PROFILES))
def profile(request) -> str:
    return str(request.param)


@pytest.fixture(scope="module")
def rendered(profile) -> Manifests:
    return Manifests(template(*PROFILES[profile]))


@pytest.fixture(scope="module")
def default() -> Manifests:
    return Manifests(template())


@pytest.fixture(scope="module")
def replicated() -> Manifests:
    return Manifests(template(*PROFILES["replicated"]))


def node_container(m: Manifests) -> dict[str, Any]:
    sts = m.get("StatefulSet", NODE)
    (container,) = [c for c in sts["spec"]["template"]["spec"]["containers"] if c["name"] == "node"]
    assert isinstance(container, dict)
    return container


def env_names(parser_factory: Any, prefix: str) -> set[str]:
    names = set()
    for action in parser_factory()._actions:
        if action.option_strings and action.dest != "help":
            names.add(prefix + action.option_strings[0].lstrip("-").replace("-", "_").upper())
    return names


# ---- helm itself ----


def test_helm_lint_strict(profile):
    result = helm("lint", "--strict", str(CHART), *PROFILES[profile], check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 chart(s) failed" in result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--set", "node.orderer=raft"], "/node/orderer"),
        (["--set", "node.network=moonnet"], "/node/network"),
        (["--set", "node.replicaCount=3"], "needs node.orderer=etcd"),
        (["--set", "node.orderer=etcd"], "needs etcd.enabled=true or etcd.externalEndpoints"),
        (["--set", "node.network=testnet"], "needs node.genesis"),
        (["--set", "operator.snapshots.every=weekly"], "/operator/snapshots/every"),
        (["--set", "node.typo=1"], "typo"),
        (["--set", "node.readWorkers=-2"], "/node/readWorkers"),
        (["--set", "node.readAnswerBytes=-1"], "/node/readAnswerBytes"),
        (["--set", "node.treeCacheNodes=-1"], "/node/treeCacheNodes"),
        (["--set-string", "node.stateHistory=0"], "/node/stateHistory"),
        (["--set-string", "node.stateHistory=some"], "/node/stateHistory"),
    ],
)
def test_bad_values_are_refused_with_a_reason(args, message):
    result = helm("template", RELEASE, str(CHART), *args, check=False)
    assert result.returncode != 0
    assert message in result.stderr


def test_every_value_is_documented_and_every_doc_names_a_value():
    text = (CHART / "values.yaml").read_text()
    documented = set(re.findall(r"^\s*## @param (\S+)", text, flags=re.M))

    def leaves(node: Any, prefix: str = "") -> set[str]:
        if isinstance(node, dict) and node and prefix.count(".") < 3:
            out: set[str] = set()
            for k, v in node.items():
                path = f"{prefix}.{k}" if prefix else k
                out |= {path} if path in documented else leaves(v, path)
            return out
        return {prefix}

    values = yaml.safe_load(text)
    assert leaves(values) <= documented, leaves(values) - documented
    for path in documented:
        node: Any = values
        for part in path.split("."):
            assert isinstance(node, dict) and part in node, f"@param {path} names no value"
            node = node[part]


# ---- common shape ----


def test_labels_selectors_and_security_contexts(rendered):
    assert rendered.workloads()
    for w in rendered.workloads():
        name = w["metadata"]["name"]
        labels = w["metadata"]["labels"]
        for key in ("app.kubernetes.io/name", "app.kubernetes.io/instance", "app.kubernetes.io/component"):
            assert key in labels, (name, key)
        assert labels["app.kubernetes.io/managed-by"] == "Helm"
        template_labels = w["spec"]["template"]["metadata"]["labels"]
        assert w["spec"]["selector"]["matchLabels"].items() <= template_labels.items(), name
        pod = w["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True, name
        assert pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault", name
        for c in pod["containers"]:
            sc = c["securityContext"]
            assert sc["readOnlyRootFilesystem"] is True, (name, c["name"])
            assert sc["allowPrivilegeEscalation"] is False, (name, c["name"])
            assert sc["capabilities"]["drop"] == ["ALL"], (name, c["name"])
            assert "limits" in c["resources"] and "requests" in c["resources"], (name, c["name"])


def test_services_point_at_ports_their_pods_expose(rendered):
    workloads = rendered.workloads()
    for svc in rendered.kind("Service"):
        selector = svc["spec"]["selector"]
        pods = [w for w in workloads if selector.items() <= w["spec"]["template"]["metadata"]["labels"].items()]
        assert pods, f"Service {svc['metadata']['name']} selects no workload"
        for port in svc["spec"]["ports"]:
            target = port["targetPort"]
            for w in pods:
                names = {p["name"] for c in w["spec"]["template"]["spec"]["containers"] for p in c.get("ports", [])}
                assert target in names, (svc["metadata"]["name"], target, w["metadata"]["name"])


def test_env_vars_are_flags_the_programs_know(rendered):
    known = (
        env_names(node_parser, "CHAIN_NODE_")
        | env_names(gateway_parser, "CHAIN_GATEWAY_")
        | env_names(operator_parser, "CHAIN_OPERATOR_")
    )
    for w in rendered.workloads():
        for c in w["spec"]["template"]["spec"]["containers"]:
            for name in env_of(c):
                if name.startswith("CHAIN_"):
                    assert name in known, f"{w['metadata']['name']}/{c['name']}: {name} is no flag"


# ---- nodes ----


def test_node_verify_workers_follow_the_pods_cpu_limit(rendered):
    env = env_of(node_container(rendered))
    assert env["CHAIN_NODE_VERIFY_WORKERS"] == "-1"  # auto: sized by the node from what follows
    ref = env["CHAIN_NODE_CPU_LIMIT"]["resourceFieldRef"]
    assert ref == {"containerName": "node", "resource": "limits.cpu", "divisor": "1"}


def test_node_read_workers_and_tree_cache_reach_the_node(default):
    env = env_of(node_container(default))
    assert env["CHAIN_NODE_READ_WORKERS"] == "-1"  # the node's default: sized by the node, as verifyWorkers
    assert env["CHAIN_NODE_TREE_CACHE_NODES"] == "250000"
    assert env["CHAIN_NODE_STATE_HISTORY"] == "8"  # the node's default, written out
    assert env["CHAIN_NODE_READ_ANSWER_BYTES"] == "8388608"  # the node's default, written out (not 8.388608e+06)
    tuned = Manifests(
        template(
            "--set",
            "node.readWorkers=0",
            "--set",
            "node.treeCacheNodes=1000000",
            "--set",
            "node.readAnswerBytes=0",
            "--set-string",
            "node.stateHistory=all",
        )
    )
    env = env_of(node_container(tuned))
    assert env["CHAIN_NODE_READ_WORKERS"] == "0"  # the main process serves every call
    assert env["CHAIN_NODE_TREE_CACHE_NODES"] == "1000000"
    assert env["CHAIN_NODE_STATE_HISTORY"] == "all"  # an archive node
    assert env["CHAIN_NODE_READ_ANSWER_BYTES"] == "0"


def test_node_statefulset_probes_ports_and_volumes(rendered, profile):
    sts = rendered.get("StatefulSet", NODE)
    assert sts["spec"]["serviceName"] == HEADLESS
    assert sts["spec"]["replicas"] == (3 if profile == "replicated" else 1)
    # Held: the operator releases one pod at a time (tests/charts/test_rolls.py)
    held = sts["spec"]["replicas"]
    assert sts["spec"]["updateStrategy"] == {"type": "RollingUpdate", "rollingUpdate": {"partition": held}}
    c = node_container(rendered)
    assert c["command"] == ["chain-node"]
    assert c["image"] == "ghcr.io/example/chain-node:0.1.0"
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert ports == {"grpc": 50051, "grpc-web": 50052, "admin": 50053, "internal": 50054, "metrics": 9464}
    # TLS on: the kubelet's grpc probe speaks no TLS, so each probe runs the chart's probe script over TLS
    for probe, service in [
        ("readinessProbe", "readiness"),  # readiness and liveness are separate services
        ("startupProbe", "chain.v1.ChainService"),
        ("livenessProbe", "liveness"),
    ]:
        command = c[probe]["exec"]["command"]
        assert command == ["python", "/etc/chain/probe/grpc-health-probe.py", "localhost:50051", service,
                           "/etc/chain/tls/ca.crt"], probe  # fmt: skip
    env = env_of(c)
    assert env["CHAIN_NODE_GRPC_ADDR"] == "0.0.0.0:50051"
    assert env["CHAIN_NODE_INTERNAL_ADDR"] == "0.0.0.0:50054"
    assert env["CHAIN_NODE_METRICS_ADDR"] == "0.0.0.0:9464"
    assert env["CHAIN_NODE_ADMIN_TOKEN"]["secretKeyRef"]["name"] == f"{FULL}-admin"
    assert env["CHAIN_NODE_DATA_DIR"] == "/var/lib/chain/data"
    (claim,) = sts["spec"]["volumeClaimTemplates"]
    assert claim["metadata"]["name"] == "data"
    assert {m["mountPath"] for m in c["volumeMounts"]} >= {"/var/lib/chain", "/tmp"}


def test_headless_and_client_services_and_pdb(rendered):
    headless = rendered.get("Service", HEADLESS)
    assert headless["spec"]["clusterIP"] == "None"
    assert headless["spec"]["publishNotReadyAddresses"] is True
    client = rendered.get("Service", NODE)
    assert client["spec"].get("clusterIP") != "None"
    assert not client["spec"].get("publishNotReadyAddresses", False)
    pdb = rendered.get("PodDisruptionBudget", NODE)
    assert pdb["spec"]["maxUnavailable"] == 1
    sts = rendered.get("StatefulSet", NODE)
    assert pdb["spec"]["selector"]["matchLabels"] == sts["spec"]["selector"]["matchLabels"]


def test_replicated_profile_orders_through_the_in_chart_etcd(replicated, default):
    env = env_of(node_container(replicated))
    assert env["CHAIN_NODE_ORDERER"] == "etcd"
    urls = env["CHAIN_NODE_ETCD_ENDPOINTS"].split(",")
    assert urls == [f"https://{FULL}-etcd-{i}.{FULL}-etcd-headless.{NAMESPACE}.svc:2379" for i in range(3)]
    assert env["CHAIN_NODE_NODE_ID"] == "$(POD_NAME)"
    # members forward and state-sync to each other's internal listener (over mutual TLS: the node's own flags)
    assert env["CHAIN_NODE_ADVERTISE_ADDR"] == f"$(POD_NAME).{HEADLESS}.{NAMESPACE}.svc:50054"
    # the members share a generated cluster secret (forwarded batches are not verified again)
    ref = env["CHAIN_NODE_CLUSTER_SECRET"]["secretKeyRef"]
    assert ref == {"name": f"{FULL}-admin", "key": "cluster-secret", "optional": True}
    secret = replicated.get("Secret", f"{FULL}-admin")
    assert len(base64.b64decode(secret["data"]["cluster-secret"])) >= 16
    assert secret["data"]["cluster-secret"] != secret["data"]["admin-token"]
    etcd = replicated.get("StatefulSet", f"{FULL}-etcd")
    assert etcd["spec"]["replicas"] == 3
    (ec,) = etcd["spec"]["template"]["spec"]["containers"]
    # a starting member reads its initial cluster from the operator's ConfigMap (the first install's: 3 members)
    ref = env_of(ec)["ETCD_INITIAL_CLUSTER"]["configMapKeyRef"]
    assert len(replicated.get("ConfigMap", ref["name"])["data"][ref["key"]].split(",")) == 3
    assert replicated.get("PodDisruptionBudget", f"{FULL}-etcd")["spec"]["minAvailable"] == 2
    assert replicated.get("Service", f"{FULL}-etcd-headless")["spec"]["publishNotReadyAddresses"] is True
    # The single-node default has no etcd at all.
    assert env_of(node_container(default))["CHAIN_NODE_ORDERER"] == "solo"
    assert not [s for s in default.kind("StatefulSet") if s["metadata"]["name"].endswith("-etcd")]


# ---- gateway, redis ----


def test_gateway_deployment_service_hpa_and_redis(rendered):
    gw = rendered.get("Deployment", f"{FULL}-gateway")
    assert "replicas" not in gw["spec"]  # the HPA owns it
    (c,) = gw["spec"]["template"]["spec"]["containers"]
    assert c["command"] == ["chain-gateway"]
    env = env_of(c)
    nodes = f"dns:///{FULL}-gateway-nodes.{NAMESPACE}.svc"
    assert env["CHAIN_GATEWAY_NODE_ADDR"] == f"grpcs://{nodes}:50051"  # every ready node, over TLS
    assert env["CHAIN_GATEWAY_NODE_INTERNAL_ADDR"] == f"grpcs://{nodes}:50054"
    assert env["CHAIN_GATEWAY_REDIS_URL"] == f"rediss://{FULL}-redis:6379/0"
    assert env["CHAIN_GATEWAY_METRICS_ADDR"] == "0.0.0.0:9465"
    assert c["readinessProbe"]["httpGet"]["path"] == "/v1/health"
    hpa = rendered.get("HorizontalPodAutoscaler", f"{FULL}-gateway")
    assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": f"{FULL}-gateway"}
    assert hpa["spec"]["minReplicas"] >= 2
    redis = rendered.get("StatefulSet", f"{FULL}-redis")
    assert redis["spec"]["replicas"] == 1


def test_external_redis_and_no_redis():
    external = Manifests(template("--set", "redis.enabled=false", "--set", "redis.externalUrl=redis://cache:6379/1"))
    (c,) = external.get("Deployment", f"{FULL}-gateway")["spec"]["template"]["spec"]["containers"]
    assert env_of(c)["CHAIN_GATEWAY_REDIS_URL"] == "redis://cache:6379/1"
    # no password unless redis.auth.existingSecret names one; no CA (the external Redis's is not the cluster's)
    assert "CHAIN_GATEWAY_REDIS_PASSWORD_FILE" not in env_of(c) and "CHAIN_GATEWAY_REDIS_CA_FILE" not in env_of(c)
    assert not [s for s in external.kind("StatefulSet") if s["metadata"]["name"].endswith("-redis")]
    embedded = Manifests(template("--set", "redis.enabled=false"))
    (c,) = embedded.get("Deployment", f"{FULL}-gateway")["spec"]["template"]["spec"]["containers"]
    assert "CHAIN_GATEWAY_REDIS_URL" not in env_of(c)
    assert "CHAIN_GATEWAY_REDIS_PASSWORD_FILE" not in env_of(c)


# ---- OpenTelemetry ----


def test_otel_exporter_settings_reach_node_and_gateway():
    m = Manifests(template("--set", "otel.endpoint=http://collector.observability:4317"))
    for c in (node_container(m), m.get("Deployment", f"{FULL}-gateway")["spec"]["template"]["spec"]["containers"][0]):
        env = env_of(c)
        assert env["OTEL_EXPORTER_OTLP_ENDPOINT"] == "http://collector.observability:4317"
        assert env["OTEL_SERVICE_NAME"] in ("chain-node", "chain-gateway")
        assert "k8s.pod.name=$(POD_NAME)" in env["OTEL_RESOURCE_ATTRIBUTES"]
    off = Manifests(template())
    assert "OTEL_EXPORTER_OTLP_ENDPOINT" not in env_of(node_container(off))


# ---- network policies ----


def test_network_policies_admit_only_the_peers_that_need_each_port(rendered):
    policy = rendered.get("NetworkPolicy", NODE)
    rules = {tuple(p["port"] for p in rule["ports"]): rule for rule in policy["spec"]["ingress"]}
    admin = rules[("admin",)]
    (peer,) = admin["from"]
    assert peer["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == "operator"
    grpc_from = {
        p["podSelector"]["matchLabels"].get("app.kubernetes.io/component") for p in rules[("grpc", "grpc-web")]["from"]
    }
    assert {"envoy", "gateway", "operator", "node"} <= grpc_from
    redis = rendered.get("NetworkPolicy", f"{FULL}-redis")
    (rule,) = redis["spec"]["ingress"]
    assert [p["podSelector"]["matchLabels"]["app.kubernetes.io/component"] for p in rule["from"]] == ["gateway"]


# ---- operator ----


def test_operator_rbac_and_network_object(rendered):
    sa = rendered.get("ServiceAccount", f"{FULL}-operator")
    dep = rendered.get("Deployment", f"{FULL}-operator")
    assert dep["spec"]["replicas"] == 1 and dep["spec"]["strategy"]["type"] == "Recreate"
    pod = dep["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == sa["metadata"]["name"]
    (c,) = pod["containers"]
    assert c["command"] == ["chain-operator"]
    assert env_of(c)["CHAIN_OPERATOR_NAMESPACE"] == NAMESPACE
    role = rendered.get("Role", f"{FULL}-operator")
    granted = {
        (g, r, v) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]
    }
    for need in [
        ("chain.dev", "chainnetworks", "watch"),
        ("chain.dev", "chainnetworks/status", "patch"),
        ("chain.dev", "chainsnapshots", "create"),
        ("chain.dev", "chainsnapshots", "delete"),
        ("apps", "statefulsets", "patch"),
        ("", "pods", "get"),
    ]:
        assert need in granted, need
    binding = rendered.get("RoleBinding", f"{FULL}-operator")
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"][0]["name"] == sa["metadata"]["name"]

    network = rendered.get("ChainNetwork", FULL)
    crd = yaml.safe_load((CHART / "crds" / "chainnetworks.chain.dev.yaml").read_text())
    jsonschema.validate(network, crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"])
    spec = parse_spec(network["spec"])
    assert spec.statefulset == NODE
    assert spec.desired_image == node_container(rendered)["image"]
    assert spec.replicas == rendered.get("StatefulSet", NODE)["spec"]["replicas"]


def test_a_digest_pinned_install_hands_the_operator_the_digest():
    """With image.digest the ChainNetwork carries it, so the operator wants exactly the image the pods run."""
    digest = "sha256:" + "ab" * 32
    m = Manifests(template("--set", f"image.digest={digest}"))
    network = m.get("ChainNetwork", FULL)
    assert network["spec"]["digest"] == digest
    image = node_container(m)["image"]
    assert image.endswith("@" + digest)
    assert parse_spec(network["spec"]).desired_image == image


# ---- Envoy ----


# The rendered Envoy configuration itself: tests/charts/test_envoy_config.py.


def test_envoy_image_is_the_version_the_tests_run(default):
    dep = default.get("Deployment", f"{FULL}-envoy")
    (c,) = dep["spec"]["template"]["spec"]["containers"]
    version = subprocess.run(
        [str(ROOT / ".venv" / "bin" / "envoy"), "--version"], check=True, capture_output=True, text=True, timeout=60
    ).stdout
    match = re.search(r"/(\d+\.\d+\.\d+)/", version)
    assert match is not None, version
    assert c["image"].endswith(f":v{match.group(1)}")
    assert c["readinessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}


def test_dashboards_and_service_monitors(tmp_path):
    chart = tmp_path / "chain"
    shutil.copytree(CHART, chart)
    (chart / "dashboards").mkdir(exist_ok=True)
    (chart / "dashboards" / "test.json").write_text('{"title": "test"}\n')
    out = helm(
        "template", RELEASE, str(chart), "--namespace", NAMESPACE, "--set", "metrics.serviceMonitor.enabled=true"
    ).stdout
    m = Manifests([d for d in yaml.safe_load_all(out) if d])
    dashboards = m.get("ConfigMap", f"{FULL}-dashboards")
    assert dashboards["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(dashboards["data"]["test.json"]) == {"title": "test"}
    monitors = {s["metadata"]["name"]: s for s in m.kind("ServiceMonitor")}
    assert set(monitors) == {NODE, f"{FULL}-gateway"}
    assert all(s["spec"]["endpoints"][0]["port"] == "metrics" for s in monitors.values())
    off = Manifests(template("--set", "metrics.enabled=false"))
    assert not off.kind("ServiceMonitor")
    assert env_of(node_container(off))["CHAIN_NODE_METRICS_ADDR"] == ""
    assert "metrics" not in {p["name"] for p in node_container(off)["ports"]}


def test_external_etcd_endpoints():
    m = Manifests(
        template(
            "--set",
            "node.replicaCount=3,node.orderer=etcd",
            "--set",
            "etcd.externalEndpoints={http://etcd-a:2379,http://etcd-b:2379}",
        )
    )
    env = env_of(node_container(m))
    assert env["CHAIN_NODE_ETCD_ENDPOINTS"] == "http://etcd-a:2379,http://etcd-b:2379"
    assert not [s for s in m.kind("StatefulSet") if s["metadata"]["name"].endswith("-etcd")]
    assert not [p for p in m.kind("NetworkPolicy") if p["metadata"]["name"].endswith("-etcd")]


def test_replicated_nodes_state_sync_in_an_init_container_with_its_own_budget(replicated, default):
    spec = replicated.get("StatefulSet", NODE)["spec"]["template"]["spec"]
    (init,) = spec["initContainers"]
    assert init["name"] == "state-sync"
    assert init["command"] == ["chain-node", "state-sync"]
    assert init["image"] == node_container(replicated)["image"]
    env, main = env_of(init), env_of(node_container(replicated))
    known = env_names(node_parser, "CHAIN_NODE_")
    assert {n for n in env if n.startswith("CHAIN_")} <= known
    for name in ("CHAIN_NODE_DATA_DIR", "CHAIN_NODE_ETCD_ENDPOINTS", "CHAIN_NODE_ETCD_PREFIX", "CHAIN_NODE_NODE_ID"):
        assert env[name] == main[name], name  # the same member, store and log as the node itself
    assert env["CHAIN_NODE_ORDERER"] == "etcd"
    assert env["CHAIN_NODE_RESTORE_TIMEOUT"] == main["CHAIN_NODE_RESTORE_TIMEOUT"] == "3600"
    assert {m["mountPath"] for m in init["volumeMounts"]} >= {"/var/lib/chain", "/tmp"}
    assert init["securityContext"] == node_container(replicated)["securityContext"]
    # A single solo node has nobody to sync from.
    assert "initContainers" not in default.get("StatefulSet", NODE)["spec"]["template"]["spec"]


def test_state_sync_can_be_switched_off_and_tuned():
    m = Manifests(
        template(
            *PROFILES["replicated"],
            "--set", "node.stateSync.enabled=false", "--set", "node.stateSync.timeoutSeconds=600",
            "--set", "node.stateSync.rateBytesPerSecond=52428800",
        )
    )  # fmt: skip
    assert "initContainers" not in m.get("StatefulSet", NODE)["spec"]["template"]["spec"]
    env = env_of(node_container(m))
    assert env["CHAIN_NODE_RESTORE_TIMEOUT"] == "600"
    assert env["CHAIN_NODE_STATE_SYNC_RATE"] == "52428800"
