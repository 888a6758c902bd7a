"""The Grafana dashboard charts/chain/dashboards/chain.json: a dashboard over exactly the metrics the node,
the gateway and the operator serve (the Prometheus names documented in docs/observability.md, which
tests/node/telemetry and tests/gateway/test_telemetry_metrics.py scrape from real processes) and the etcd,
Envoy, cAdvisor and kube-state-metrics names that document lists for it, every query narrowed by a namespace
variable; shipped by the chart in the ConfigMap the Grafana sidecar picks up (the template:
test_chain_chart.py)."""

from __future__ import annotations

import json
import re
from typing import Any

from tests.charts.helm import CHART, ROOT, Manifests, template

DASHBOARD = CHART / "dashboards" / "chain.json"
SUFFIXES = ("_bucket", "_count", "_sum")


def documented() -> set[str]:
    """The Prometheus names in the metric tables of docs/observability.md (second column)."""
    names = set()
    for line in (ROOT / "docs" / "observability.md").read_text().splitlines():
        cells = [c.strip() for c in line.split("|")]
        if len(cells) > 3 and re.fullmatch(r"`[a-z_]+`", cells[2]):
            names.add(cells[2].strip("`"))
    return names


def listed_first() -> set[str]:
    """Prometheus names in the first column of docs/observability.md's tables: the operator's metrics and the
    other programs' metrics the dashboard reads."""
    names = set()
    for line in (ROOT / "docs" / "observability.md").read_text().splitlines():
        cells = [c.strip() for c in line.split("|")]
        if len(cells) > 3 and re.fullmatch(r"`[a-z_]+`", cells[1]) and not re.fullmatch(r"`[a-z_]+`", cells[2]):
            names.add(cells[1].strip("`"))
    return names


def exprs(node: Any) -> list[str]:
    if isinstance(node, dict):
        found = [node["expr"]] if isinstance(node.get("expr"), str) else []
        return found + [e for v in node.values() for e in exprs(v)]
    if isinstance(node, list):
        return [e for v in node for e in exprs(v)]
    return []


def metric(name: str, known: set[str]) -> str:
    for suffix in SUFFIXES:
        if name.endswith(suffix) and name.removesuffix(suffix) in known:
            return name.removesuffix(suffix)
    return name


def test_dashboard_shows_every_documented_metric_and_nothing_else():
    doc = json.loads(DASHBOARD.read_text())
    assert doc["uid"] and doc["title"] and doc["schemaVersion"] >= 30
    names = documented()
    assert {"rpc_server_duration_milliseconds", "chain_block_height", "chain_relay_lag_seconds"} <= names
    assert len(names) == 31  # 23 node metrics, 8 gateway metrics
    others = listed_first()
    assert {"chain_operator_rollout_phase", "etcd_server_has_leader", "envoy_cluster_membership_healthy"} <= others
    assert "container_memory_working_set_bytes" in others and len(others) == 21  # 4 operator, 17 other programs'
    known = names | others
    used = {metric(n, known) for e in exprs(doc) for n in re.findall(r"\b([a-z][a-z0-9_]*)\{", e)}
    assert used == known, (used - known, known - used)
    panels = [p for p in doc["panels"] if p["type"] != "row"]
    assert all(p["targets"] and p["datasource"]["uid"] == "${datasource}" for p in panels)
    assert len({p["id"] for p in doc["panels"]}) == len(doc["panels"])
    variables = {v["name"]: v for v in doc["templating"]["list"]}
    assert variables["datasource"]["query"] == "prometheus"
    assert "target_info" in variables["job"]["definition"]  # served by both processes
    assert "target_info" in variables["namespace"]["definition"]
    rows = [p["title"] for p in doc["panels"] if p["type"] == "row"]
    for component in ("etcd", "Envoy", "Redis", "Operator"):
        assert any(title.startswith(component) for title in rows), (component, rows)


def test_every_query_is_narrowed_by_the_namespace():
    """Every selector of every query carries namespace=~"$namespace": one release's panels, not a mix of all."""
    doc = json.loads(DASHBOARD.read_text())
    selectors = [s for e in exprs(doc) for s in re.findall(r"\b[a-z][a-z0-9_]*(\{[^}]*\})", e)]
    assert len(selectors) > 60
    for selector in selectors:
        assert 'namespace=~"$namespace"' in selector, selector


def test_chart_ships_the_dashboard_for_the_grafana_sidecar():
    m = Manifests(template())
    (shipped,) = [d for d in m.kind("ConfigMap") if "chain.json" in d.get("data", {})]
    assert shipped["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(shipped["data"]["chain.json"]) == json.loads(DASHBOARD.read_text())
