"""Scale 1 -> 3 (docs/operations.md): `helm upgrade` from the default profile (one solo node) to the replicated
one. A StatefulSet's selector, serviceName, podManagementPolicy and volumeClaimTemplates cannot change in
place, so the switch works only if the two renders agree on them - which needs the existing volume size kept
(the replicated profile asks for bigger volumes). Ordinal 0 keeps its claim (`data-prod-chain-node-0`): the solo
store becomes member 0's."""

from __future__ import annotations

from typing import Any

from tests.charts.helm import PROFILES, RELEASE, Manifests, env_of, template

NODE = f"{RELEASE}-chain-node"
IMMUTABLE = ("selector", "serviceName", "podManagementPolicy", "volumeClaimTemplates")


def node_sts(*args: str) -> dict[str, Any]:
    spec = Manifests(template(*args)).get("StatefulSet", NODE)["spec"]
    assert isinstance(spec, dict)
    return spec


def immutable(spec: dict[str, Any]) -> dict[str, Any]:
    return {k: spec.get(k) for k in IMMUTABLE}


def test_the_replicated_profile_with_the_same_volume_size_can_replace_the_solo_statefulset():
    solo = node_sts()
    size = solo["volumeClaimTemplates"][0]["spec"]["resources"]["requests"]["storage"]
    # Step 1 of the runbook: etcd on, still one member, the volume size kept.
    one = node_sts(*PROFILES["replicated"], "--set", f"node.replicaCount=1,node.persistence.size={size}")
    assert immutable(one) == immutable(solo)
    assert one["replicas"] == 1 and solo["volumeClaimTemplates"][0]["metadata"]["name"] == "data"
    node = next(c for c in one["template"]["spec"]["containers"] if c["name"] == "node")
    assert env_of(node)["CHAIN_NODE_ORDERER"] == "etcd"
    assert [c["name"] for c in one["template"]["spec"]["initContainers"]] == ["state-sync"]
    # Step 3: three members, still the same immutable fields.
    three = node_sts(*PROFILES["replicated"], "--set", f"node.persistence.size={size}")
    assert immutable(three) == immutable(solo) and three["replicas"] == 3
    # Without keeping the size, the StatefulSet would have to be replaced (Kubernetes refuses the update).
    assert immutable(node_sts(*PROFILES["replicated"])) != immutable(solo)
