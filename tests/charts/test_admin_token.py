"""How the admin token reaches the programs (docs/operations.md "Rotate the admin token"): as an environment
variable from the Secret, in the node and the operator alike, never as a mounted file and with no checksum of
the Secret on a pod template. So a changed Secret changes nothing until those pods restart, which is what the
runbook says to do."""

from __future__ import annotations

import pytest

from tests.charts.helm import PROFILES, RELEASE, Manifests, template

SECRET = "chain-admin-token"


@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_the_token_is_an_environment_variable_read_at_start(profile):
    m = Manifests(template(*PROFILES[profile], "--set", f"adminToken.existingSecret={SECRET}"))
    assert not [s for s in m.kind("Secret") if s["metadata"]["name"] == f"{RELEASE}-chain-admin"]
    users = {}
    for workload in m.workloads():
        pod = workload["spec"]["template"]
        for c in pod["spec"]["containers"] + pod["spec"].get("initContainers", []):
            for e in c.get("env", []):
                ref = e.get("valueFrom", {}).get("secretKeyRef", {})
                if ref.get("name") == SECRET and ref.get("key") == "admin-token":
                    users[(workload["metadata"]["name"], c["name"])] = e["name"]
        for v in pod["spec"].get("volumes", []):
            assert v.get("secret", {}).get("secretName") != SECRET, "mounted: the runbook would be wrong"
        annotations = pod.get("metadata", {}).get("annotations", {})
        assert not [k for k in annotations if "admin" in k], annotations
    assert users == {
        (f"{RELEASE}-chain-node", "node"): "CHAIN_NODE_ADMIN_TOKEN",
        (f"{RELEASE}-chain-operator", "operator"): "CHAIN_OPERATOR_ADMIN_TOKEN",
    }
