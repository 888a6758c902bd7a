"""TLS in the chart (docs/deploy.md "TLS"): on by default, certificates mounted as files (never in the
environment), the generated CA kept across an upgrade (lookup against a Kubernetes API), cert-manager
Certificates with the right usages and names, Secrets you manage under gitOps, and a plaintext chart with TLS
off. The node probe and Redis run as rendered, with the chart's own certificates."""

from __future__ import annotations

import asyncio
import base64
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import kmock
import pytest
import yaml
from cryptography import x509

from tests.charts.helm import (
    CHART,
    HELM,
    NAMESPACE,
    PROFILES,
    RELEASE,
    Manifests,
    env_of,
    helm,
    remount,
    secret_files,
)
from tests.charts.helm import template as render
from tests.fixtures.kubecluster import kubeconfig
from tests.fixtures.nodeproc import NodeProcess, NodeTLSFiles
from tests.fixtures.procs import free_port, stop_process

FULL = f"{RELEASE}-chain"
MOUNTS = {"/etc/chain/tls", "/etc/etcd/tls", "/etc/redis/tls"}
EVERYTHING = ("--set", "backup.enabled=true,backup.bucket=bkt,etcd.backup.enabled=true")
CERT_MANAGER = ("--set", "tls.certManager.issuerRef.name=cluster-ca,tls.certManager.issuerRef.kind=ClusterIssuer")


def pods(m: Manifests) -> list[tuple[str, dict[str, Any]]]:
    """(name, pod spec) of every workload, CronJobs included, Envoy's apart (templates/envoy is not this file's)."""
    out = []
    for doc in m.docs:
        if doc["kind"] in ("Deployment", "StatefulSet"):
            spec = doc["spec"]["template"]["spec"]
        elif doc["kind"] == "CronJob":
            spec = doc["spec"]["jobTemplate"]["spec"]["template"]["spec"]
        else:
            continue
        if not doc["metadata"]["name"].endswith("-envoy"):
            out.append((doc["metadata"]["name"], spec))
    return out


def containers(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return [*spec.get("initContainers", []), *spec["containers"]]


def cert_of(secret: dict[str, Any], key: str = "tls.crt") -> x509.Certificate:
    return x509.load_pem_x509_certificate(base64.b64decode(secret["data"][key]))


@pytest.fixture(scope="module", params=sorted(PROFILES))
def everything(request: pytest.FixtureRequest) -> Manifests:
    return Manifests(render(*PROFILES[str(request.param)], *EVERYTHING))


# ---- on by default, files only ----


def test_every_pod_mounts_its_certificate_secret_as_files(everything):
    secrets = {s["metadata"]["name"]: s for s in everything.kind("Secret")}
    for name, spec in pods(everything):
        volumes = {v["name"]: v for v in spec.get("volumes", [])}
        tls_mounts = [
            (c["name"], m) for c in containers(spec) for m in c.get("volumeMounts", []) if m["mountPath"] in MOUNTS
        ]
        assert tls_mounts, f"{name}: no certificate mounted"
        for container, mount in tls_mounts:
            secret = volumes[mount["name"]]["secret"]["secretName"]
            assert mount["readOnly"] is True, (name, container)
            assert {"tls.crt", "tls.key", "ca.crt"} <= set(secrets[secret]["data"]), (name, secret)
            assert secrets[secret]["type"] == "kubernetes.io/tls"


def test_no_key_or_password_reaches_the_environment(everything):
    tls_secrets = {s["metadata"]["name"] for s in everything.kind("Secret") if s["type"] == "kubernetes.io/tls"}
    for name, spec in pods(everything):
        for c in containers(spec):
            for e in c.get("env", []):
                value = str(e.get("value", ""))
                assert "BEGIN" not in value and "PRIVATE" not in value, (name, e["name"])
                ref = e.get("valueFrom", {}).get("secretKeyRef", {})
                assert ref.get("name") not in tls_secrets | {f"{FULL}-redis-auth"}, (name, e["name"])
                if e["name"].endswith(("_KEY", "_KEY_FILE", "_PASSWORD_FILE")):
                    assert value.startswith("/etc/"), (name, e["name"], value)  # a mounted file's path
            for source in c.get("envFrom", []):
                assert source.get("secretRef", {}).get("name") not in tls_secrets, (name, c["name"])
            assert not [a for a in c.get("args", []) if "requirepass" in str(a)], name


def test_default_render_is_tls_on_every_hop(everything):
    env = {name: {k: v for c in containers(spec) for k, v in env_of(c).items()} for name, spec in pods(everything)}
    node = env[f"{FULL}-node"]
    assert node["CHAIN_NODE_TLS_CERT"] == "/etc/chain/tls/tls.crt"
    assert node["CHAIN_NODE_TLS_KEY"] == "/etc/chain/tls/tls.key"
    assert node["CHAIN_NODE_TLS_CLIENT_CA"] == "/etc/chain/tls/ca.crt"
    assert node["CHAIN_NODE_INTERNAL_ADDR"] == "0.0.0.0:50054"
    gateway = env[f"{FULL}-gateway"]
    assert gateway["CHAIN_GATEWAY_NODE_ADDR"].startswith("grpcs://")
    assert gateway["CHAIN_GATEWAY_NODE_WEB_URL"].startswith("https://")
    assert gateway["CHAIN_GATEWAY_REDIS_URL"].startswith("rediss://")
    assert gateway["CHAIN_GATEWAY_NODE_TLS_CERT"] == "/etc/chain/tls/tls.crt"
    assert gateway["CHAIN_GATEWAY_REDIS_CA_FILE"] == "/etc/chain/tls/ca.crt"
    assert gateway["CHAIN_GATEWAY_REDIS_PASSWORD_FILE"] == "/etc/chain/redis/password"
    assert gateway["CHAIN_GATEWAY_TRUSTED_PROXIES"] == "10.0.0.0/8"
    operator = env[f"{FULL}-operator"]
    assert operator["CHAIN_OPERATOR_NODE_CA_FILE"] == "/etc/chain/tls/ca.crt"
    assert operator["CHAIN_OPERATOR_NODE_TLS_CERT"] == "/etc/chain/tls/tls.crt"
    if f"{FULL}-etcd" in env:
        assert node["CHAIN_NODE_ETCD_ENDPOINTS"].startswith("https://")
        assert node["CHAIN_NODE_ETCD_CERT"] == "/etc/chain/etcd-tls/tls.crt"
        etcd = env[f"{FULL}-etcd"]
        assert etcd["ETCD_CLIENT_CERT_AUTH"] == etcd["ETCD_PEER_CLIENT_CERT_AUTH"] == "true"
        members = everything.get("ConfigMap", f"{FULL}-etcd-members")["data"]  # what a starting member reads
        assert etcd["ETCD_INITIAL_CLUSTER"]["configMapKeyRef"]["name"] == f"{FULL}-etcd-members"
        assert members["initialCluster"].count("=https://") == 3
        assert operator["CHAIN_OPERATOR_ETCD_CERT"] == "/etc/etcd/tls/tls.crt"  # etcd asks the operator for one


def test_the_generated_certificates_chain_to_one_ca_with_the_names_each_side_checks(everything):
    ca = cert_of(everything.get("Secret", f"{FULL}-ca-key"))
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert cert_of(everything.get("Secret", f"{FULL}-ca"), "ca.crt") == ca
    node = everything.get("Secret", f"{FULL}-node-tls")
    cert = cert_of(node)
    cert.verify_directly_issued_by(ca)
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    dns = set(names.get_values_for_type(x509.DNSName))
    replicas = everything.get("StatefulSet", f"{FULL}-node")["spec"]["replicas"]
    pods_dns = {f"{FULL}-node-{i}.{FULL}-node-headless.{NAMESPACE}.svc" for i in range(replicas)}
    # the members' advertised names, the gateways' dns:/// name, the probe's localhost
    assert pods_dns | {f"{FULL}-gateway-nodes.{NAMESPACE}.svc", f"{FULL}-node.{NAMESPACE}.svc", "localhost"} <= dns
    assert {str(ip) for ip in names.get_values_for_type(x509.IPAddress)} == {"127.0.0.1", "::1"}
    for secret in everything.kind("Secret"):
        if secret["type"] == "kubernetes.io/tls" and secret["metadata"]["name"] != f"{FULL}-ca-key":
            cert_of(secret).verify_directly_issued_by(ca)
            assert cert_of(secret, "ca.crt") == ca


# ---- the generated CA is kept across an upgrade ----


async def render_against(k: kmock.KubernetesEmulator, tmp_path: Path, *args: str) -> Manifests:
    """`helm template --dry-run=server`: lookup reads the Kubernetes API (kmock), as an upgrade would."""
    config = tmp_path / "kubeconfig"
    config.write_text(kubeconfig(str(k.url).rstrip("/"), NAMESPACE))
    proc = await asyncio.create_subprocess_exec(
        str(HELM), "template", RELEASE, str(CHART), "--namespace", NAMESPACE, "--dry-run=server",
        "--kubeconfig", str(config), *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    return Manifests([d for d in yaml.safe_load_all(out.decode()) if d])


def install(k: kmock.KubernetesEmulator, m: Manifests) -> None:
    """What the first install left in the cluster: its Secrets."""
    for secret in m.kind("Secret"):
        k.objects["v1/secrets", NAMESPACE, secret["metadata"]["name"]] = secret


async def test_the_ca_and_the_certificates_are_kept_across_an_upgrade(kmock, tmp_path):
    kmock.resources["v1/secrets"] = kmock.ResourceInfo(kind="Secret", singular="secret", namespaced=True)
    kmock.resources["apps/v1/statefulsets"] = kmock.ResourceInfo(
        kind="StatefulSet", singular="statefulset", namespaced=True
    )
    first = await render_against(kmock, tmp_path, *PROFILES["replicated"])
    install(kmock, first)
    second = await render_against(kmock, tmp_path, *PROFILES["replicated"])
    for name in (f"{FULL}-ca-key", f"{FULL}-ca", f"{FULL}-node-tls", f"{FULL}-etcd-tls", f"{FULL}-redis-auth"):
        assert second.get("Secret", name)["data"] == first.get("Secret", name)["data"], name
    assert first.get("Secret", f"{FULL}-ca-key")["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"

    # A certificate near its end is signed again, by the same CA; one whose names changed too (a fourth member).
    ca = cert_of(first.get("Secret", f"{FULL}-ca-key"))
    gateway = kmock.objects["v1/secrets", NAMESPACE, f"{FULL}-gateway-tls"].raw
    gateway["metadata"]["annotations"]["chain.dev/not-after"] = "1000"
    kmock.objects["v1/secrets", NAMESPACE, f"{FULL}-gateway-tls"] = gateway
    third = await render_against(kmock, tmp_path, *PROFILES["replicated"], "--set", "node.replicaCount=4")
    for name in (f"{FULL}-gateway-tls", f"{FULL}-node-tls"):
        renewed = third.get("Secret", name)
        assert renewed["data"]["tls.crt"] != first.get("Secret", name)["data"]["tls.crt"], name
        cert_of(renewed).verify_directly_issued_by(ca)
    dns = cert_of(third.get("Secret", f"{FULL}-node-tls")).extensions.get_extension_for_class(
        x509.SubjectAlternativeName
    )
    assert f"{FULL}-node-3.{FULL}-node-headless.{NAMESPACE}.svc" in dns.value.get_values_for_type(x509.DNSName)
    assert third.get("Secret", f"{FULL}-etcd-tls")["data"] == first.get("Secret", f"{FULL}-etcd-tls")["data"]


# ---- cert-manager ----


def test_cert_manager_renders_certificates_with_usages_and_names():
    m = Manifests(render(*PROFILES["replicated"], *EVERYTHING, *CERT_MANAGER))
    assert not [s for s in m.kind("Secret") if s["type"] == "kubernetes.io/tls"]  # cert-manager makes them
    certs = {c["metadata"]["name"]: c["spec"] for c in m.kind("Certificate")}
    assert set(certs) == {
        f"{FULL}-{c}-tls" for c in ("node", "gateway", "operator", "backup", "envoy", "etcd", "etcd-client", "redis")
    }
    for name, spec in certs.items():
        assert spec["secretName"] == name
        assert spec["issuerRef"] == {"name": "cluster-ca", "kind": "ClusterIssuer", "group": "cert-manager.io"}
        assert spec["privateKey"]["rotationPolicy"] == "Always"
    both, client, server = {"server auth", "client auth"}, {"client auth"}, {"server auth"}
    for c, usages in [("node", both), ("etcd", both), ("gateway", both), ("operator", client), ("backup", client),
                      ("etcd-client", client), ("envoy", server), ("redis", server)]:  # fmt: skip
        assert set(certs[f"{FULL}-{c}-tls"]["usages"]) - {"digital signature", "key encipherment"} == usages, c
    node = certs[f"{FULL}-node-tls"]
    assert {f"{FULL}-node-{i}.{FULL}-node-headless.{NAMESPACE}.svc" for i in range(3)} <= set(node["dnsNames"])
    assert {"localhost", f"{FULL}-node.{NAMESPACE}.svc", f"{FULL}-gateway-nodes.{NAMESPACE}.svc"} <= set(
        node["dnsNames"]
    )
    assert node["ipAddresses"] == ["127.0.0.1", "::1"]
    etcd = certs[f"{FULL}-etcd-tls"]
    assert {f"{FULL}-etcd-{i}.{FULL}-etcd-headless.{NAMESPACE}.svc" for i in range(3)} <= set(etcd["dnsNames"])
    # the pods mount the Secrets the Certificates fill
    mounted = {v["secret"]["secretName"] for _, spec in pods(m) for v in spec.get("volumes", []) if "secret" in v}
    assert mounted - {f"{FULL}-redis-auth"} <= set(certs)
    # a public issuer for the edge alone
    edge = Manifests(
        render(*CERT_MANAGER, "--set", "tls.edge.issuerRef.name=letsencrypt,tls.edge.dnsNames={chain.example}")
    )
    spec = edge.get("Certificate", f"{FULL}-envoy-tls")["spec"]
    assert spec["issuerRef"]["name"] == "letsencrypt" and "chain.example" in spec["dnsNames"]
    assert edge.get("Certificate", f"{FULL}-node-tls")["spec"]["issuerRef"]["name"] == "cluster-ca"


# ---- gitOps: Secrets you manage ----


def test_gitops_uses_the_existing_secrets():
    components = ("node", "gateway", "operator", "backup", "envoy", "etcd", "etcdClient", "redis", "ca")
    names = {c: f"mine-{c.lower()}" for c in components}
    m = Manifests(
        render(
            *PROFILES["replicated"], *EVERYTHING,
            "--set", "gitOps=true,adminToken.existingSecret=admin,redis.auth.existingSecret=redis-pw",
            "--set", ",".join(f"tls.existingSecrets.{c}={n}" for c, n in names.items()),
        )
    )  # fmt: skip
    assert not m.kind("Secret") and not m.kind("Certificate")
    mounted = {
        name: {v["secret"]["secretName"] for v in spec.get("volumes", []) if "secret" in v} for name, spec in pods(m)
    }
    assert mounted[f"{FULL}-node"] == {names["node"], names["etcdClient"]}
    assert mounted[f"{FULL}-gateway"] == {names["gateway"], "redis-pw"}
    assert mounted[f"{FULL}-operator"] == {names["operator"], names["etcdClient"]}  # it runs etcd's membership
    assert mounted[f"{FULL}-etcd"] == {names["etcd"]}
    assert mounted[f"{FULL}-redis"] == {names["redis"], "redis-pw"}
    assert mounted[f"{FULL}-backup"] == {names["backup"]}
    assert mounted[f"{FULL}-etcd-backup"] == {names["etcdClient"]}


# ---- TLS off: the plaintext chart ----


def test_tls_off_renders_no_tls_flags():
    m = Manifests(render(*PROFILES["replicated"], *EVERYTHING, "--set", "tls.enabled=false"))
    assert not m.kind("Certificate")
    assert not [s for s in m.kind("Secret") if s["type"] == "kubernetes.io/tls"]
    for name, spec in pods(m):
        for c in containers(spec):
            for k, v in env_of(c).items():
                assert not any(t in k for t in ("TLS", "CA_FILE", "CERT", "ETCD_KEY")), (name, k)
                assert not str(v).startswith(("grpcs://", "https://", "rediss://")), (name, k, v)
            assert not [m for m in c.get("volumeMounts", []) if m["mountPath"] in MOUNTS], name
            assert not [a for a in c.get("args", []) + c.get("command", []) if "tls" in str(a)], name
    (node,) = [c for c in m.get("StatefulSet", f"{FULL}-node")["spec"]["template"]["spec"]["containers"]]
    assert node["readinessProbe"]["grpc"] == {"port": 50051, "service": "readiness"}  # the kubelet's own
    env = env_of(node)
    assert env["CHAIN_NODE_INTERNAL_ADDR"] == "0.0.0.0:50054"  # the two surfaces stay apart
    assert env["CHAIN_NODE_ETCD_ENDPOINTS"].startswith("http://")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--set", "tls.certManager.issuerRef.kind=Vault"], "/tls/certManager/issuerRef/kind"),
        (["--set", "tls.generated.certDays=0"], "/tls/generated/certDays"),
        (["--set", "tls.edge.dnsNames={Not A Name}"], "/tls/edge/dnsNames"),
        (["--set", "tls.existingSecrets.nodes=x"], "nodes"),
        (["--set", "node.streams.memoryShare=2"], "/node/streams/memoryShare"),
        (["--set", "gateway.trustedProxies={everyone}"], "/gateway/trustedProxies"),
    ],
)
def test_bad_tls_values_are_refused(args, message):
    result = helm("template", RELEASE, str(CHART), *args, check=False)
    assert result.returncode != 0 and message in result.stderr


# ---- stream caps ----


@pytest.mark.parametrize(
    ("args", "streams", "connections"),
    [
        ([], 2048, 2730),  # 2 GiB x 0.25 / 256 KiB; 512 MiB x 0.5 / (64 KiB + 32 KiB)
        (["--set", "node.resources.limits.memory=1Gi,gateway.resources.limits.memory=1G"], 1024, 5086),
        (["--set", "node.streams.max=100,gateway.sse.maxConnections=50"], 100, 50),
        (["--set", "node.resources.limits=null,gateway.resources.limits=null"], 4096, 1024),  # the programs' own
    ],
)
def test_stream_caps_follow_the_memory_limits(args, streams, connections):
    m = Manifests(render(*args))
    (node,) = m.get("StatefulSet", f"{FULL}-node")["spec"]["template"]["spec"]["containers"]
    assert env_of(node)["CHAIN_NODE_MAX_STREAMS"] == str(streams)
    (gw,) = m.get("Deployment", f"{FULL}-gateway")["spec"]["template"]["spec"]["containers"]
    assert env_of(gw)["CHAIN_GATEWAY_MAX_CONNECTIONS"] == str(connections)
    assert env_of(gw)["CHAIN_GATEWAY_SSE_MAX_BUFFER_BYTES"] == "65536"


# ---- as rendered, with the chart's certificates ----


def test_node_probe_runs_over_tls_with_the_charts_certificates(tmp_path):
    m = Manifests(render())
    files = secret_files(m, f"{FULL}-node-tls", tmp_path / "tls")
    script = tmp_path / "grpc-health-probe.py"
    script.write_text(m.get("ConfigMap", f"{FULL}-probe")["data"]["grpc-health-probe.py"])
    (c,) = m.get("StatefulSet", f"{FULL}-node")["spec"]["template"]["spec"]["containers"]
    node = NodeProcess(
        tmp_path / "node", tls=NodeTLSFiles(files / "tls.crt", files / "tls.key", files / "ca.crt")
    ).start()

    def probe(kind: str, ca: Path = files / "ca.crt") -> subprocess.CompletedProcess[str]:
        command = c[kind]["exec"]["command"]
        local = [sys.executable, str(script), command[2].replace("50051", node.grpc_target.rpartition(":")[2])]
        return subprocess.run([*local, command[3], str(ca)], capture_output=True, text=True, timeout=60, check=False)

    try:
        for kind in ("startupProbe", "livenessProbe", "readinessProbe"):
            result = probe(kind)
            assert result.returncode == 0, (kind, result.stderr)
        other = secret_files(Manifests(render()), f"{FULL}-ca", tmp_path / "other")  # another render's CA
        refused = probe("readinessProbe", other / "ca.crt")
        assert refused.returncode == 1 and len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    finally:
        node.stop()


def test_redis_runs_as_rendered_with_tls_and_a_password(tmp_path):
    redis_server = shutil.which("redis-server")
    assert redis_server, "redis-server is missing (make install-test)"
    m = Manifests(render())
    spec = m.get("StatefulSet", f"{FULL}-redis")["spec"]["template"]["spec"]
    mounts = {
        "/etc/redis/tls": secret_files(m, f"{FULL}-redis-tls", tmp_path / "tls"),
        "/etc/redis/auth": secret_files(m, f"{FULL}-redis-auth", tmp_path / "auth"),
        "/etc/redis/acl": tmp_path / "acl",
    }
    (tmp_path / "acl").mkdir()

    def local(args: list[str]) -> list[str]:
        return list(remount({str(i): str(a) for i, a in enumerate(args)}, mounts).values())

    (init,) = spec["initContainers"]
    made = subprocess.run(["sh", *local(init["command"][1:])], check=False, capture_output=True, text=True, timeout=30)
    assert made.returncode == 0, made.stderr
    (c,) = spec["containers"]
    port = free_port()
    args = local(c["args"])
    assert args[:2] == ["--port", "0"]  # no plaintext port
    args[args.index("--tls-port") + 1] = str(port)
    args[args.index("--dir") + 1] = str(tmp_path)
    proc = subprocess.Popen([redis_server, *args], stdout=subprocess.DEVNULL)
    try:
        ping = c["readinessProbe"]["exec"]["command"]
        assert ping[-3] == "6379"
        check = ["sh", "-c", ping[2], ping[3], str(port), *local(ping[5:])]
        for _ in range(50):
            result = subprocess.run(check, check=False, capture_output=True, text=True, timeout=30)
            if result.returncode == 0:
                break
            time.sleep(0.1)
        assert result.returncode == 0, result.stdout + result.stderr
        cli = ["redis-cli", "--tls", "--cacert", str(mounts["/etc/redis/tls"] / "ca.crt"), "-p", str(port)]
        anonymous = subprocess.run([*cli, "ping"], check=False, capture_output=True, text=True, timeout=30)
        assert "NOAUTH" in anonymous.stdout + anonymous.stderr  # the password is required
        plain = subprocess.run(
            ["redis-cli", "-p", str(port), "ping"], check=False, capture_output=True, text=True, timeout=30
        )
        assert "PONG" not in plain.stdout  # no plaintext
    finally:
        stop_process(proc, 10)
