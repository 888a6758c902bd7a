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
PATHS = {"statefulset_path": ("apps", "statefulsets"), "pod_path": ("", "pods"), "configmap_path": ("", "configmaps")}
# What only the etcd membership does (etcd_cluster.py): granted when the chart runs an in-chart etcd.
ETCD_ONLY = {("", "configmaps", "patch"), ("", "pods", "delete")}
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


BUILDERS = {"custom_path", *PATHS}


def builder_call(node: ast.AST) -> ast.Call | None:
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in BUILDERS:
        return node
    return None


def path_names(tree: ast.AST) -> dict[str, ast.Call]:
    """Names standing for a path in a module: `x = <builder>(...)`, and functions or properties that return one."""
    out: dict[str, ast.Call] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and (call := builder_call(node.value)):
            out.update({t.id: call for t in node.targets if isinstance(t, ast.Name)})
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for ret in ast.walk(node):
                if isinstance(ret, ast.Return) and ret.value is not None and (call := builder_call(ret.value)):
                    out[node.name] = call
    return out


def resource_of(arg: ast.expr, names: dict[str, ast.Call]) -> tuple[str, str]:
    """(group, resource) of a path argument: a builder call, or a name/attribute/call the module maps to one."""
    call = builder_call(arg)
    if call is None:
        key = arg.func if isinstance(arg, ast.Call) else arg
        name = key.id if isinstance(key, ast.Name) else key.attr if isinstance(key, ast.Attribute) else ""
        call = names.get(name)
    assert call is not None and isinstance(call.func, ast.Name), f"cannot tell the resource of {ast.unparse(arg)}"
    if call.func.id == "custom_path":
        plural = call.args[0]
        assert isinstance(plural, ast.Name), ast.unparse(call)
        sub = next((k.value for k in call.keywords if k.arg == "subresource"), None)
        suffix = f"/{sub.value}" if isinstance(sub, ast.Constant) and isinstance(sub.value, str) else ""
        return "chain.dev", PLURALS[plural.id] + suffix
    return PATHS[call.func.id]


def client_calls() -> set[Grant]:
    """(group, resource, verb) of every `kube.<method>(<path>, ...)` in the operator's code."""
    used: set[Grant] = set()
    for path in sorted(OPERATOR.glob("*.py")):
        if path.name == "kube.py":
            continue
        tree = ast.parse(path.read_text())
        names = path_names(tree)
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in VERBS
                and ast.unparse(node.func.value).split(".")[-1] in ("kube", "_kube")
            ):
                group, resource = resource_of(node.args[0], names)
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
    used = client_calls() | KOPF
    if not m.kind("StatefulSet") or not any(s["metadata"]["name"] == f"{FULL}-etcd" for s in m.kind("StatefulSet")):
        used -= ETCD_ONLY
    assert set(granted) == used, {"unused": set(granted) - used, "missing": used - set(granted)}
    for verb in ("list", "watch", "update", "deletecollection", "*"):
        assert ("apps", "statefulsets", verb) not in granted
    assert not any("*" in g for g in granted)


@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_named_objects_are_granted_by_name(profile):
    m = Manifests(template(*PROFILES[profile]))
    granted = grants(m)
    sts = m.get("StatefulSet", f"{FULL}-node")
    etcd = [s["metadata"]["name"] for s in m.kind("StatefulSet") if s["metadata"]["name"] == f"{FULL}-etcd"]
    for verb in ("get", "patch"):
        assert granted[("apps", "statefulsets", verb)] == [sts["metadata"]["name"], *etcd]
    if etcd:
        assert granted[("", "configmaps", "patch")] == [f"{FULL}-etcd-members"]
        assert granted[("", "pods", "delete")] == [f"{FULL}-etcd-{i}" for i in range(9)]
    pods = granted[("", "pods", "get")]
    # every node pod by name: the ones rendered, and those a `kubectl scale` adds up to operator.rbac.podOrdinals
    assert pods == [f"{FULL}-node-{i}" for i in range(max(sts["spec"]["replicas"], 16))]
    # Verbs Kubernetes cannot restrict by name stay unnamed (a resourceNames there would deny everything).
    for key in (("chain.dev", "chainsnapshots", "create"), ("chain.dev", "chainsnapshots", "list")):
        assert granted[key] == []


def test_no_other_role_or_cluster_role():
    m = Manifests(template(*PROFILES["replicated"]))
    assert not m.kind("ClusterRole") and not m.kind("ClusterRoleBinding")
    assert [r["metadata"]["name"] for r in m.kind("Role")] == [f"{FULL}-operator"]


@pytest.mark.parametrize(("replicas", "ordinals", "covered"), [(3, 16, 16), (5, 4, 5), (1, 1, 1)])
def test_pods_a_kubectl_scale_adds_are_granted(replicas, ordinals, covered):
    """`kubectl scale statefulset/<release>-chain-node --replicas 7` (docs/operations.md) makes pods -3 to -6 before
    any helm upgrade renders this Role again: the operator reads them by name as it does the first ones."""
    args = ["--set", "node.orderer=etcd", "--set", "etcd.enabled=true", "--set", f"node.replicaCount={replicas}"]
    m = Manifests(template(*args, "--set", f"operator.rbac.podOrdinals={ordinals}"))
    pods = grants(m)[("", "pods", "get")]
    assert pods == [f"{FULL}-node-{i}" for i in range(covered)]
    assert f"{FULL}-node-{replicas - 1}" in pods  # never fewer than the StatefulSet renders


def test_the_read_replicas_statefulset_and_pods_are_granted_by_name():
    """The operator holds and releases the read replicas (replica_rollout.py): their StatefulSet and pods, by name."""
    args = ("--set", "readReplicas.enabled=true,readReplicas.replicaCount=3", "--set-json", 'node.genesis={"a": 1}')
    m = Manifests(template(*PROFILES["replicated"], *args, "--set", "operator.rbac.podOrdinals=2"))
    granted = grants(m)
    for verb in ("get", "patch"):
        assert granted[("apps", "statefulsets", verb)] == [f"{FULL}-node", f"{FULL}-replica", f"{FULL}-etcd"]
    pods = granted[("", "pods", "get")]
    assert pods == [f"{FULL}-node-{i}" for i in range(3)] + [f"{FULL}-replica-{i}" for i in range(3)]
