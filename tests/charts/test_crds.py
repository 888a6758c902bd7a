"""Upgrading the CRDs (docs/operations.md "Upgrade the CRDs"): Helm installs `crds/` once and never upgrades
them, and an API server silently drops spec fields its CRD does not declare (the spec schema is structural,
without x-kubernetes-preserve-unknown-fields). So every field the chart writes into a custom resource must be
declared by the CRD shipped beside it, and the runbook applies the CRDs before `helm upgrade`."""

from __future__ import annotations

from typing import Any

import yaml

from tests.charts.helm import CHART, PROFILES, Manifests, template

DIGEST = "sha256:" + "ab" * 32


def spec_schema(crd_file: str) -> dict[str, Any]:
    crd = yaml.safe_load((CHART / "crds" / crd_file).read_text())
    (version,) = crd["spec"]["versions"]
    schema = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert isinstance(schema, dict)
    return schema


def undeclared(value: Any, schema: dict[str, Any], path: str = "spec") -> list[str]:
    """Paths in `value` that a structural schema would prune."""
    if not isinstance(value, dict) or schema.get("x-kubernetes-preserve-unknown-fields"):
        return []
    props = schema.get("properties", {})
    out = [f"{path}.{k}" for k in value if k not in props]
    for k, v in value.items():
        if k in props:
            out += undeclared(v, props[k], f"{path}.{k}")
    return out


def test_every_field_the_chart_writes_into_a_chainnetwork_is_declared_by_its_crd():
    schema = spec_schema("chainnetworks.chain.dev.yaml")
    assert not schema.get("x-kubernetes-preserve-unknown-fields")  # pruning applies: the premise of the runbook
    for profile in sorted(PROFILES):
        m = Manifests(template(*PROFILES[profile], "--set", f"image.digest={DIGEST}"))
        (network,) = m.kind("ChainNetwork")
        assert network["spec"]["digest"] == DIGEST
        assert undeclared(network["spec"], schema) == [], profile
