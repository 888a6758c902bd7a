"""The chart's Envoy configuration against the shipped files: with TLS (the default) it is envoy/envoy-tls.yaml
and its SDS files, with tls.enabled=false it is envoy/envoy.yaml, in both cases but for addresses, the
in-cluster names and the values the chart exposes; Envoy itself accepts each rendering. What the
configuration does is tested through the real Envoy in tests/envoy/test_envoy_edge.py (both sources)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.charts.helm import NAMESPACE, ROOT, Manifests, template
from tests.fixtures.envoyproc import TEMPLATE, TLS_TEMPLATE, EdgeTLS, load, shipped_sds, walk

ENVOY = ROOT / ".venv" / "bin" / "envoy"


def rendered(*args: str) -> Manifests:
    return Manifests(template(*args))


def envoy_files(m: Manifests) -> dict[str, Any]:
    (cm,) = [d for d in m.kind("ConfigMap") if d["metadata"]["name"].endswith("-envoy")]
    return {name: yaml.safe_load(text) for name, text in cm["data"].items() if name.endswith(".yaml")}


def strip_addresses(config: dict[str, Any]) -> dict[str, Any]:
    """What must be equal between a shipped file and the chart: everything but addresses and discovery."""
    config = yaml.safe_load(yaml.safe_dump(config))
    config["admin"]["address"]["socket_address"].pop("port_value")
    for listener in config["static_resources"]["listeners"]:
        listener.pop("address")
    hcm = config["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
    cors = hcm["route_config"]["virtual_hosts"][0]["typed_per_filter_config"]["envoy.filters.http.cors"]
    cors.pop("allow_origin_string_match")
    for cluster in config["static_resources"]["clusters"]:
        for key in ("type", "load_assignment", "dns_lookup_family", "dns_refresh_rate"):
            cluster.pop(key, None)
    for node in walk(config):  # the name checked on the nodes' certificates: the headless Service's
        if "sni" in node:
            node["sni"] = "node"
        for san in node.get("match_typed_subject_alt_names", []):
            san["matcher"] = {"exact": "node"}
    return config


@pytest.mark.parametrize("tls", [True, False], ids=["tls", "plaintext"])
def test_the_chart_renders_the_shipped_configuration(tls: bool) -> None:
    files = envoy_files(rendered("--set", f"tls.enabled={str(tls).lower()}"))
    shipped = load(TLS_TEMPLATE if tls else TEMPLATE)
    assert strip_addresses(files.pop("envoy.yaml")) == strip_addresses(shipped)
    assert files == (shipped_sds() if tls else {})


def test_the_chart_checks_the_headless_service_name_on_each_node() -> None:
    config = envoy_files(rendered())["envoy.yaml"]
    (cluster,) = [c for c in config["static_resources"]["clusters"] if c["name"] == "chain_node"]
    name = f"prod-chain-node-headless.{NAMESPACE}.svc.cluster.local"
    (endpoint,) = cluster["load_assignment"]["endpoints"][0]["lb_endpoints"]
    assert endpoint["endpoint"]["address"]["socket_address"] == {"address": name, "port_value": 50051}
    tls = cluster["transport_socket"]["typed_config"]
    assert tls["sni"] == name
    sans = tls["common_tls_context"]["combined_validation_context"]["default_validation_context"]
    assert sans["match_typed_subject_alt_names"] == [{"san_type": "DNS", "matcher": {"exact": name}}]
    assert config["admin"]["address"]["socket_address"]["address"] == "127.0.0.1"


def test_the_deployment_mounts_the_edge_certificate_and_the_cluster_ca() -> None:
    m = rendered()
    (dep,) = [d for d in m.kind("Deployment") if d["metadata"]["name"].endswith("-envoy")]
    pod = dep["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    (c,) = pod["containers"]
    mounts = {v["mountPath"]: v for v in c["volumeMounts"]}
    assert mounts["/etc/envoy-tls/listener"]["readOnly"] and mounts["/etc/envoy-tls/ca"]["readOnly"]
    listener = volumes[mounts["/etc/envoy-tls/listener"]["name"]]["secret"]
    assert listener["secretName"] == "prod-chain-envoy-tls"
    ca = volumes[mounts["/etc/envoy-tls/ca"]["name"]]["secret"]
    assert ca["items"] == [{"key": "ca.crt", "path": "ca.crt"}]
    plain = rendered("--set", "tls.enabled=false")
    (dep,) = [d for d in plain.kind("Deployment") if d["metadata"]["name"].endswith("-envoy")]
    (c,) = dep["spec"]["template"]["spec"]["containers"]
    assert not [v for v in c["volumeMounts"] if v["mountPath"].startswith("/etc/envoy-tls")]


def test_the_limits_follow_the_values() -> None:
    args = ["--set", "envoy.writeLimit.burst=7,envoy.writeLimit.perSecond=3,envoy.writeLimit.retryAfterMs=250"]
    config = envoy_files(rendered(*args, "--set", "envoy.overload.maxHeapBytes=100000000"))["envoy.yaml"]
    hcm = config["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
    limit = hcm["route_config"]["virtual_hosts"][0]["routes"][0]["typed_per_filter_config"][
        "envoy.filters.http.local_ratelimit"
    ]
    assert limit["descriptors"][0]["token_bucket"] == {"max_tokens": 7, "tokens_per_fill": 3, "fill_interval": "1s"}
    assert {"header": {"key": "retry-after-ms", "value": "250"}} in limit["response_headers_to_add"]
    (heap,) = [m for m in config["overload_manager"]["resource_monitors"] if m["name"].endswith("fixed_heap")]
    assert heap["typed_config"]["max_heap_size_bytes"] == 100000000


@pytest.mark.parametrize("tls", [True, False], ids=["tls", "plaintext"])
def test_envoy_accepts_the_rendered_configuration(tls: bool, tmp_path: Path) -> None:
    files = envoy_files(rendered("--set", f"tls.enabled={str(tls).lower()}"))
    config = files.pop("envoy.yaml")
    if tls:  # the SDS files must exist where the config says: the test's copies
        pem = tmp_path / "tls.pem"
        pem.write_text("-----BEGIN CERTIFICATE-----\n")
        config = EdgeTLS(pem, pem, pem).install(config, files, tmp_path / "sds")
    path = tmp_path / "envoy.yaml"
    path.write_text(yaml.safe_dump(config))
    result = subprocess.run(
        [str(ENVOY), "--mode", "validate", "-c", str(path)], check=False, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]


def envoy_container(m: Manifests) -> dict[str, Any]:
    (dep,) = [d for d in m.kind("Deployment") if d["metadata"]["name"].endswith("-envoy")]
    (c,) = dep["spec"]["template"]["spec"]["containers"]
    return dict(c)


def test_a_plaintext_envoy_says_so_in_one_line_at_start(tmp_path: Path) -> None:
    """With tls.enabled=false the rendered command prints one warning line, then runs Envoy with its args
    (run here with the real binary and `--version` for args); with TLS it is Envoy alone."""
    assert envoy_container(rendered())["command"] == ["envoy"]
    command = envoy_container(rendered("--set", "tls.enabled=false"))["command"]
    env = {"PATH": f"{ENVOY.parent}:/usr/bin:/bin"}
    done = subprocess.run([*command, "--version"], capture_output=True, text=True, env=env, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    warning = [line for line in done.stderr.splitlines() if "without TLS" in line]
    assert len(warning) == 1 and "0.0.0.0:" in warning[0], done.stderr
    assert "version" in done.stdout.lower()
