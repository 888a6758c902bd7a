"""The target labels the Prometheus operator gives the series a rendered ServiceMonitor or PodMonitor scrapes.

What prometheus-operator generates for a monitor, reduced to the labels the chart's alerts select (`job`,
`namespace`): a ServiceMonitor's targets are the Services its selector matches in the monitor's namespace that
have a port of the endpoint's name; `job` is the value of the Service's `jobLabel` label, else the Service's
name. A PodMonitor's targets are the pods (the rendered workloads' templates) its selector matches with a
container port of that name; `job` is the value of the pod's `jobLabel` label, else "<namespace>/<monitor>".
The endpoint's `relabelings` then apply in order (action `replace`; any other action is refused here, so a
monitor this module cannot read fails the tests instead of being read wrong).
"""

from __future__ import annotations

import re
from typing import Any

from tests.charts.helm import Manifests

Labels = dict[str, str]


def _meta_name(kind: str, label: str) -> str:
    return f"__meta_kubernetes_{kind}_label_" + re.sub(r"[^a-zA-Z0-9_]", "_", label)


def _relabel(labels: Labels, rules: list[dict[str, Any]]) -> Labels:
    out = dict(labels)
    for rule in rules:
        action = rule.get("action", "replace").lower()
        assert action == "replace", f"relabeling action {action!r} is not read by tests/charts/monitors.py"
        source = rule.get("separator", ";").join(out.get(s, "") for s in rule.get("sourceLabels", []))
        match = re.fullmatch(rule.get("regex", "(.*)"), source)
        if match is None:
            continue
        replacement = re.sub(r"\$\{?(\d+)\}?", r"\\\1", str(rule.get("replacement", "$1")))
        out[rule["targetLabel"]] = match.expand(replacement)
    return {k: v for k, v in out.items() if not k.startswith("__")}


def _selected(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    assert set(selector) <= {"matchLabels"}, f"selector {selector} is not read by tests/charts/monitors.py"
    return dict(selector.get("matchLabels", {})).items() <= labels.items()


def _service_targets(m: Manifests, monitor: dict[str, Any]) -> list[Labels]:
    spec, namespace = monitor["spec"], monitor["metadata"]["namespace"]
    found = []
    for svc in m.kind("Service"):
        meta = svc["metadata"]
        if meta["namespace"] != namespace or not _selected(spec["selector"], meta.get("labels", {})):
            continue
        for endpoint in spec["endpoints"]:
            if endpoint["port"] not in {p.get("name") for p in svc["spec"]["ports"]}:
                continue
            svc_labels = meta.get("labels", {})
            labels = {
                "job": svc_labels.get(spec.get("jobLabel", ""), meta["name"]),
                "namespace": namespace,
                "service": meta["name"],
                "__meta_kubernetes_namespace": namespace,
                "__meta_kubernetes_service_name": meta["name"],
                **{_meta_name("service", k): v for k, v in svc_labels.items()},
            }
            found.append(_relabel(labels, endpoint.get("relabelings", [])))
    return found


def _pod_targets(m: Manifests, monitor: dict[str, Any]) -> list[Labels]:
    spec, meta = monitor["spec"], monitor["metadata"]
    namespace = meta["namespace"]
    found = []
    for workload in m.workloads():
        pod_labels = workload["spec"]["template"]["metadata"].get("labels", {})
        if workload["metadata"]["namespace"] != namespace or not _selected(spec["selector"], pod_labels):
            continue
        ports = {p.get("name") for c in workload["spec"]["template"]["spec"]["containers"] for p in c.get("ports", [])}
        for endpoint in spec["podMetricsEndpoints"]:
            if endpoint["port"] not in ports:
                continue
            labels = {
                "job": pod_labels.get(spec.get("jobLabel", ""), f"{namespace}/{meta['name']}"),
                "namespace": namespace,
                "__meta_kubernetes_namespace": namespace,
                **{_meta_name("pod", k): v for k, v in pod_labels.items()},
            }
            found.append(_relabel(labels, endpoint.get("relabelings", [])))
    return found


def target_labels(m: Manifests, monitor: dict[str, Any]) -> list[Labels]:
    """The labels of every target the monitor makes Prometheus scrape (one per Service or workload port)."""
    if monitor["kind"] == "ServiceMonitor":
        return _service_targets(m, monitor)
    assert monitor["kind"] == "PodMonitor", monitor["kind"]
    return _pod_targets(m, monitor)


def scraped_as(m: Manifests, monitor_name: str) -> Labels:
    """`job` and `namespace` of what the monitor of that name scrapes; every target of it must agree."""
    (monitor,) = [d for d in m.kind("ServiceMonitor") + m.kind("PodMonitor") if d["metadata"]["name"] == monitor_name]
    targets = {(t["job"], t["namespace"]) for t in target_labels(m, monitor)}
    assert len(targets) == 1, f"{monitor_name}: targets labelled {sorted(targets) or 'nothing'}"
    ((job, namespace),) = targets
    return {"job": job, "namespace": namespace}


def monitored_jobs(m: Manifests) -> set[str]:
    """Every job the rendered monitors produce."""
    monitors = m.kind("ServiceMonitor") + m.kind("PodMonitor")
    return {t["job"] for monitor in monitors for t in target_labels(m, monitor)}
