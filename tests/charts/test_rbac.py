"""The operator's Role grants exactly what the operator does: the calls of its own API client, read from
operator/chain_operator, plus what kopf does with the ChainNetwork, and names wherever Kubernetes allows."""

from __future__ import annotations

import ast

import pytest

from tests.charts.helm import PROFILES, RELEASE, ROOT, Manifests, template

FULL = f"{RELEASE}-chain"
OPERATOR = ROOT / "operator" / "chain_operator"
# KubeApi method -> RBAC verb; path builder -> (API group, resource).
VERBS = {"get": "get", "list": "list", "create": "create", "merge_patch": "patch", "delete": "delete"}
PATHS = {"statefulset_path": ("apps", "statefulsets"), "pod_path": ("", "pods")}
PLURALS = {"NETWORKS": "chainnetworks", "SNAPSHOTS": "chainsnapshots"}
# kopf (standalone, one namespace, annotations progress storage): it lists and watches the handled resource,
# patches it (progress and diff-base annotations) and its status subresource, and posts Events.
KOPF = {
    ("chain.dev", "chainnetworks", "list"),
    ("chain.dev", "chainnetworks", "watch"),
    ("chain.dev", "chainnetworks", "patch"),
    ("chain.dev", "chainnetworks/status", "patch"),
    ("", "events", "create"),
}

Grant = tuple[str, str, str]


def resource_of(call: ast.expr, assigned: dict[str, ast.expr]) -> tuple[str, str]:
    if isinstance(call, ast.Name) and call.id in assigned:
        call = assigned[call.id]
    assert isinstance(call, ast.Call) and isinstance(call.func, ast.Name), ast.unparse(call)
    if call.func.id == "custom_path":
        plural = call.args[0]
        assert isinstance(plural, ast.Name), ast.unparse(call)
        return "chain.dev", PLURALS[plural.id]
    return PATHS[call.func.id]


def client_calls() -> set[Grant]:
    """(group, resource, verb) of every `kube.<method>(<path>(...))` in the operator's code."""
    used: set[Grant] = set()
    for path in sorted(OPERATOR.glob("*.py")):
        if path.name == "kube.py":
            continue
        for fn in ast.walk(ast.parse(path.read_text())):
            if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            assigned: dict[str, ast.expr] = {
                t.id: node.value
                for node in ast.walk(fn)
                if isinstance(node, ast.Assign)
                for t in node.targets
                if isinstance(t, ast.Name) and isinstance(node.value, ast.Call)
            }
            for node in ast.walk(fn):
                if (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Attribute)
                    and node.func.attr in VERBS
                    and "kube" in ast.unparse(node.func.value)
                ):
                    group, resource = resource_of(node.args[0], assigned)
                    used.add((group, resource, VERBS[node.func.attr]))
    return used


def grants(m: Manifests) -> dict[Grant, list[str]]:
    role = m.get("Role", f"{FULL}-operator")
    out: dict[Grant, list[str]] = {}
    for rule in role["rules"]:
        for g in rule["apiGroups"]:
            for r in rule["resources"]:
                for v in rule["verbs"]:
                    assert (g, r, v) not in out, f"granted twice: {(g, r, v)}"
                    out[(g, r, v)] = rule.get("resourceNames", [])
    return out


def test_the_scan_finds_the_operators_calls():
    used = client_calls()
    # A sanity floor, so that a scan that finds nothing cannot pass.
    assert {("apps", "statefulsets", "patch"), ("", "pods", "get"), ("chain.dev", "chainsnapshots", "create")} <= used


@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_role_grants_exactly_the_verbs_the_operator_uses(profile):
    m = Manifests(template(*PROFILES[profile]))
    granted = grants(m)
    assert set(granted) == client_calls() | KOPF, {
        "unused": set(granted) - (client_calls() | KOPF),
        "missing": (client_calls() | KOPF) - set(granted),
    }
    for verb in ("list", "watch", "update", "deletecollection", "*"):
        assert ("apps", "statefulsets", verb) not in granted
    assert not any("*" in g for g in granted)


@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_named_objects_are_granted_by_name(profile):
    m = Manifests(template(*PROFILES[profile]))
    granted = grants(m)
    sts = m.get("StatefulSet", f"{FULL}-node")
    for verb in ("get", "patch"):
        assert granted[("apps", "statefulsets", verb)] == [sts["metadata"]["name"]]
    pods = granted[("", "pods", "get")]
    assert pods == [f"{FULL}-node-{i}" for i in range(sts["spec"]["replicas"])]
    # Verbs Kubernetes cannot restrict by name stay unnamed (a resourceNames there would deny everything).
    for key in (("chain.dev", "chainsnapshots", "create"), ("chain.dev", "chainsnapshots", "list")):
        assert granted[key] == []


def test_no_other_role_or_cluster_role():
    m = Manifests(template(*PROFILES["replicated"]))
    assert not m.kind("ClusterRole") and not m.kind("ClusterRoleBinding")
    assert [r["metadata"]["name"] for r in m.kind("Role")] == [f"{FULL}-operator"]
