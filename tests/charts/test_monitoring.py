"""Monitoring shipped by the chart: the PrometheusRule (checked and unit-tested by promtool), what Prometheus
may scrape (Envoy's stats listener, etcd's metrics listener) and the monitors that tell it to."""

from __future__ import annotations

import re
import shutil
import string
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.charts.helm import CHART, PROFILES, RELEASE, ROOT, Manifests, helm, template
from tests.charts.monitors import monitored_jobs, scraped_as, target_labels
from tests.fixtures.procs import free_port, stop_process

FULL = f"{RELEASE}-chain"
PROMTOOL_TESTS = Path(__file__).parent / "promtool"
FULL_MONITORING = (
    *PROFILES["replicated"],
    "--set",
    "metrics.prometheusRule.enabled=true,metrics.serviceMonitor.enabled=true,etcd.backup.enabled=true,"
    "backup.enabled=true,backup.bucket=chain-backups",
)


def promtool() -> str:
    path = shutil.which("promtool")
    assert path, "promtool is missing: the Debian package `prometheus` provides it (make install-test)"
    return path


def rules_of(m: Manifests) -> dict[str, Any]:
    (rule,) = m.kind("PrometheusRule")
    spec = rule["spec"]
    assert isinstance(spec, dict)
    return spec


def alerts(spec: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["alert"]: r for g in spec["groups"] for r in g["rules"]}


@pytest.fixture(scope="module")
def monitored() -> Manifests:
    return Manifests(template(*FULL_MONITORING))


def runbook_base() -> str:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    return str(values["metrics"]["prometheusRule"]["runbookBaseUrl"]).rstrip("/")


def promtool_tests(m: Manifests) -> str:
    """chain_test.yaml with its series labelled as the rendered monitors label the component's targets."""
    fields = {"runbook": runbook_base()}
    for c in ("node", "gateway", "etcd", "operator"):
        labels = scraped_as(m, f"{FULL}-{c}")
        fields[c] = ",".join(f'{k}="{v}"' for k, v in labels.items())
        fields[f"{c}_labels"] = ", ".join(f"{k}: {v}" for k, v in labels.items())
        fields[f"{c}_job"] = labels["job"]
    return string.Template((PROMTOOL_TESTS / "chain_test.yaml").read_text()).substitute(fields)


def test_rules_pass_promtool_check_and_unit_tests(monitored, tmp_path):
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(rules_of(monitored)))
    (tmp_path / "chain_test.yaml").write_text(promtool_tests(monitored))
    check = subprocess.run(
        [promtool(), "check", "rules", str(tmp_path / "rules.yaml")],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert check.returncode == 0, check.stdout + check.stderr
    unit = subprocess.run(
        [promtool(), "test", "rules", "chain_test.yaml"],
        check=False,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert unit.returncode == 0, unit.stdout[-4000:] + unit.stderr[-4000:]
    assert "SUCCESS" in unit.stdout + unit.stderr


def github_anchors(markdown: str) -> set[str]:
    """The anchors GitHub gives a document's headings (lower case, punctuation dropped, spaces as dashes)."""
    headings = re.findall(r"^#+ (.+?)\s*$", markdown, flags=re.M)
    return {re.sub(r"[^a-z0-9 _-]", "", h.lower()).replace(" ", "-") for h in headings}


def test_every_alert_is_unit_tested_and_has_a_runbook_section(monitored):
    tested = set(re.findall(r"alertname: (\w+)", (PROMTOOL_TESTS / "chain_test.yaml").read_text()))
    anchors = github_anchors((ROOT / "docs" / "operations.md").read_text())
    for name, rule in alerts(rules_of(monitored)).items():
        assert name in tested, f"{name} has no promtool test"
        assert rule["labels"]["severity"] in ("warning", "critical")
        assert "runbook" not in rule["annotations"], name  # runbook_url, what Alertmanager templates link
        base, _, anchor = rule["annotations"]["runbook_url"].partition("#")
        assert base == runbook_base() and anchor == name.lower(), rule["annotations"]
        assert anchor in anchors, f"docs/operations.md: no section {name} (anchor #{anchor})"
    moved = alerts(
        rules_of(
            Manifests(
                template(
                    "--set",
                    "metrics.prometheusRule.enabled=true",
                    "--set",
                    "metrics.prometheusRule.runbookBaseUrl=https://runbooks.example/ops.md/",
                )
            )
        )
    )
    assert moved["ChainMemberDown"]["annotations"]["runbook_url"] == "https://runbooks.example/ops.md#chainmemberdown"


def test_every_alert_selects_a_job_the_monitors_produce(monitored):
    """A `job` an alert selects that no rendered monitor gives its targets is an alert that can never fire."""
    produced = monitored_jobs(monitored)
    assert {f"{FULL}-{c}" for c in ("node", "gateway", "etcd", "operator", "envoy")} <= produced
    for name, rule in alerts(rules_of(monitored)).items():
        for job in re.findall(r'\bjob="([^"]+)"', rule["expr"]):
            assert job in produced, f"{name} selects job={job!r}; the monitors produce {sorted(produced)}"


def test_the_monitors_job_is_the_relabeled_component_name(monitored):
    """etcd's Service is "-headless" and a PodMonitor's job is "<namespace>/<monitor>" without the relabeling."""
    etcd = monitored.get("ServiceMonitor", f"{FULL}-etcd")
    assert scraped_as(monitored, f"{FULL}-etcd") == {"job": f"{FULL}-etcd", "namespace": "chain"}
    bare = {**etcd, "spec": {**etcd["spec"], "endpoints": [{"port": "metrics"}]}}
    assert {t["job"] for t in target_labels(monitored, bare)} == {f"{FULL}-etcd-headless"}
    envoy = monitored.get("PodMonitor", f"{FULL}-envoy")
    assert scraped_as(monitored, f"{FULL}-envoy")["job"] == f"{FULL}-envoy"
    bare = {**envoy, "spec": {**envoy["spec"], "podMetricsEndpoints": [{"port": "stats"}]}}
    assert {t["job"] for t in target_labels(monitored, bare)} == {f"chain/{FULL}-envoy"}


def chain_metric_names() -> set[str]:
    text = (ROOT / "docs" / "observability.md").read_text()
    return set(re.findall(r"\| `([a-z_]+)` \|", text))


def test_chain_alerts_use_metrics_the_programs_export(monitored):
    known = chain_metric_names()
    assert "chain_block_height" in known
    for name, rule in alerts(rules_of(monitored)).items():
        if name.startswith("Etcd"):
            continue
        used = set(re.findall(r"\b((?:chain|rpc)_[a-z_]+)", rule["expr"])) - {"chain_reason_code", "chain_stream_kind"}
        used = {re.sub(r"_(count|sum|bucket)$", "", u) for u in used}
        assert used <= {re.sub(r"_(count|sum|bucket)$", "", k) for k in known}, (name, used - known)


def test_rules_follow_their_values_and_the_profile():
    default = alerts(rules_of(Manifests(template("--set", "metrics.prometheusRule.enabled=true"))))
    assert not [a for a in default if a.startswith("Etcd")]  # solo: no etcd
    assert 'job="prod-chain-node",namespace="chain"' in default["ChainNoNewBlock"]["expr"]
    assert 'persistentvolumeclaim=~"data-prod-chain-node-[0-9]+"' in default["ChainVolumeFillingUp"]["expr"]
    no_volume = alerts(
        rules_of(Manifests(template("--set", "metrics.prometheusRule.enabled=true,node.persistence.enabled=false")))
    )
    assert "ChainVolumeFillingUp" not in no_volume and "ChainStorageFailed" in no_volume
    tuned = alerts(
        rules_of(
            Manifests(template("--set", "metrics.prometheusRule.enabled=true,metrics.prometheusRule.noBlockSeconds=30"))
        )
    )
    assert "[30s]" in tuned["ChainNoNewBlock"]["expr"]
    assert not Manifests(template()).kind("PrometheusRule")
    profile = alerts(
        rules_of(Manifests(template(*PROFILES["replicated"], "--set", "metrics.prometheusRule.enabled=true")))
    )
    assert "EtcdBackupFailed" in profile  # the replicated profile backs etcd up
    off = "metrics.prometheusRule.enabled=true,etcd.backup.enabled=false"
    no_backup = alerts(rules_of(Manifests(template(*PROFILES["replicated"], "--set", off))))
    assert "EtcdDatabaseNearQuota" in no_backup and "EtcdBackupFailed" not in no_backup


def test_etcd_metrics_listener_is_scraped_and_admitted(monitored):
    etcd = monitored.get("StatefulSet", f"{FULL}-etcd")
    (c,) = etcd["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e.get("value") for e in c["env"]}
    assert env["ETCD_LISTEN_METRICS_URLS"] == "http://0.0.0.0:2381"
    assert {"name": "metrics", "containerPort": 2381, "protocol": "TCP"} in c["ports"]
    monitor = monitored.get("ServiceMonitor", f"{FULL}-etcd")
    assert monitor["spec"]["endpoints"][0]["port"] == "metrics"
    svc = monitored.get("Service", f"{FULL}-etcd-headless")
    assert "metrics" in {p["name"] for p in svc["spec"]["ports"]}
    assert monitor["spec"]["selector"]["matchLabels"].items() <= svc["metadata"]["labels"].items()
    policy = monitored.get("NetworkPolicy", f"{FULL}-etcd")
    by_port = {tuple(p["port"] for p in r["ports"]): r for r in policy["spec"]["ingress"]}
    assert "from" not in by_port[("metrics",)]  # metricsFrom empty: any pod (Prometheus) may scrape
    # The client port stays closed to everyone but the nodes, the members, the backup job and the operator (it
    # adds and removes members).
    peers = {p["podSelector"]["matchLabels"]["app.kubernetes.io/component"] for p in by_port[("client",)]["from"]}
    assert peers == {"node", "etcd", "etcd-backup", "operator"}


def test_envoy_pod_monitor_scrapes_the_stats_listener(monitored):
    (monitor,) = monitored.kind("PodMonitor")
    endpoint = monitor["spec"]["podMetricsEndpoints"][0]
    assert endpoint["port"] == "stats" and endpoint["path"] == "/stats/prometheus"
    pod_labels = monitored.get("Deployment", f"{FULL}-envoy")["spec"]["template"]["metadata"]["labels"]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()


def test_etcd_rules_use_metrics_a_real_etcd_exports(monitored, tmp_path):
    """Start the real etcd binary with the chart's metrics listener and read what it exports."""
    client, peer, metrics = free_port(), free_port(), free_port()
    proc = subprocess.Popen(
        [
            "etcd",
            "--data-dir",
            str(tmp_path / "etcd" / "data"),
            "--listen-client-urls",
            f"http://127.0.0.1:{client}",
            "--advertise-client-urls",
            f"http://127.0.0.1:{client}",
            "--listen-peer-urls",
            f"http://127.0.0.1:{peer}",
            "--initial-advertise-peer-urls",
            f"http://127.0.0.1:{peer}",
            "--initial-cluster",
            f"default=http://127.0.0.1:{peer}",
            "--listen-metrics-urls",
            f"http://127.0.0.1:{metrics}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{metrics}/metrics", timeout=2) as resp:
                    exported = set(re.findall(r"^([a-z_]+)[{ ]", resp.read().decode(), flags=re.M))
                break
            except OSError:
                assert time.monotonic() < deadline, "etcd metrics listener never answered"
                time.sleep(0.2)
    finally:
        stop_process(proc, 10)
    for name, rule in alerts(rules_of(monitored)).items():
        if name.startswith("Etcd") and "kube_" not in rule["expr"]:
            used = set(re.findall(r"\b(etcd_[a-z_]+)", rule["expr"]))
            assert used and used <= exported, (name, used - exported)


def test_helm_lint_strict_with_every_optional_part_on():
    result = helm(
        "lint",
        "--strict",
        str(CHART),
        *FULL_MONITORING,
        "--set",
        "gitOps=true,adminToken.existingSecret=chain-admin-token",
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_operator_metrics_are_served_scraped_and_admitted(monitored):
    operator = monitored.get("Deployment", f"{FULL}-operator")
    (c,) = operator["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e.get("value") for e in c["env"]}
    assert env["CHAIN_OPERATOR_METRICS_ADDR"] == "0.0.0.0:9464"
    assert {"name": "metrics", "containerPort": 9464, "protocol": "TCP"} in c["ports"]
    svc = monitored.get("Service", f"{FULL}-operator")
    assert svc["spec"]["ports"][0]["targetPort"] == "metrics"
    assert svc["spec"]["selector"].items() <= operator["spec"]["template"]["metadata"]["labels"].items()
    monitor = monitored.get("ServiceMonitor", f"{FULL}-operator")
    assert monitor["spec"]["selector"]["matchLabels"].items() <= svc["metadata"]["labels"].items()
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] == "metrics" and endpoint["honorLabels"] is True
    # The rules select the operator by the job the ServiceMonitor gives it.
    job = scraped_as(monitored, f"{FULL}-operator")["job"]
    for name in ("ChainSnapshotFailing", "ChainSnapshotTooOld", "ChainRolloutFailed", "ChainRolloutStuck"):
        assert f'job="{job}"' in alerts(rules_of(monitored))[name]["expr"]
    policy = monitored.get("NetworkPolicy", f"{FULL}-operator")
    assert [tuple(p["port"] for p in r["ports"]) for r in policy["spec"]["ingress"]] == [("metrics",)]
    off = Manifests(template("--set", "metrics.enabled=false"))
    (c,) = off.get("Deployment", f"{FULL}-operator")["spec"]["template"]["spec"]["containers"]
    assert "CHAIN_OPERATOR_METRICS_ADDR" not in {e["name"] for e in c["env"]}
    assert off.get("NetworkPolicy", f"{FULL}-operator")["spec"]["ingress"] == []
