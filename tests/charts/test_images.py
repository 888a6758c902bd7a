"""Every image of the chart is pullable from a private registry and pinned: the real helm renders every profile
with every optional workload on, and every pod spec it renders (Deployments, StatefulSets, CronJobs) carries the
pull Secrets, and every container's image honours its digest value (repository@digest when set, the tag
otherwise)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.charts.helm import PROFILES, Manifests, template

DIGESTS = {
    "image": "sha256:" + "a1" * 32,
    "envoy.image": "sha256:" + "b2" * 32,
    "redis.image": "sha256:" + "c3" * 32,
    "etcd.image": "sha256:" + "d4" * 32,
    "etcd.initImage": "sha256:" + "e5" * 32,
}
REPOSITORIES = {
    "image": "ghcr.io/example/chain-node",
    "envoy.image": "docker.io/envoyproxy/envoy",
    "redis.image": "docker.io/library/redis",
    "etcd.image": "registry.k8s.io/etcd",
    "etcd.initImage": "docker.io/library/busybox",
}
# every optional pod on: the CronJobs, etcd in the default profile too, the read replicas
EVERYTHING = [
    "--set", "backup.enabled=true", "--set", "backup.bucket=chain-backups",
    "--set", "etcd.backup.enabled=true",
    "--set", "readReplicas.enabled=true", "--set-json", 'node.genesis={"chain_id": "test"}',
]  # fmt: skip
SECRETS = ["--set-json", 'global.imagePullSecrets=["shared", {"name": "parent"}]', "--set", "image.pullSecrets={own}"]


def pod_specs(m: Manifests) -> dict[str, dict[str, Any]]:
    """Every pod spec the chart renders, by `Kind/name`."""
    out: dict[str, dict[str, Any]] = {}
    for doc in m.docs:
        spec = doc.get("spec", {})
        if doc["kind"] in ("Deployment", "StatefulSet", "DaemonSet", "Job"):
            out[f"{doc['kind']}/{doc['metadata']['name']}"] = spec["template"]["spec"]
        elif doc["kind"] == "CronJob":
            out[f"CronJob/{doc['metadata']['name']}"] = spec["jobTemplate"]["spec"]["template"]["spec"]
        elif doc["kind"] == "Pod":
            out[f"Pod/{doc['metadata']['name']}"] = spec
    return out


def images(pod: dict[str, Any]) -> list[str]:
    return [c["image"] for key in ("initContainers", "containers") for c in pod.get(key, [])]


@pytest.fixture(scope="module", params=sorted(PROFILES))
def profile(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="module")
def pinned(profile: str) -> Manifests:
    digests = [arg for path, d in DIGESTS.items() for arg in ("--set", f"{path}.digest={d}")]
    return Manifests(template(*PROFILES[profile], *EVERYTHING, *SECRETS, *digests))


def test_every_kind_of_pod_is_rendered(pinned: Manifests, profile: str) -> None:
    """The walk below sees every workload the profile has (so that it cannot pass by seeing nothing)."""
    kinds = {name.split("/")[0] + "/" + name.split("-")[-1] for name in pod_specs(pinned)}
    expected = {"StatefulSet/node", "StatefulSet/replica", "StatefulSet/redis", "Deployment/gateway"}
    expected |= {"Deployment/envoy", "Deployment/operator", "CronJob/backup"}
    if profile == "replicated":  # etcd, and its backup CronJob
        expected |= {"StatefulSet/etcd"}
        assert len([n for n in pod_specs(pinned) if n.startswith("CronJob/")]) == 2
    assert kinds == expected, kinds


def test_every_pod_has_the_pull_secrets(pinned: Manifests) -> None:
    for name, pod in pod_specs(pinned).items():
        assert pod.get("imagePullSecrets") == [{"name": "shared"}, {"name": "parent"}, {"name": "own"}], name


def test_every_image_honours_its_digest_value(pinned: Manifests, profile: str) -> None:
    by_repository = {REPOSITORIES[path]: digest for path, digest in DIGESTS.items()}
    seen = set()
    for name, pod in pod_specs(pinned).items():
        for image in images(pod):
            repository, _, digest = image.partition("@")
            assert repository in by_repository, (name, image)
            assert digest == by_repository[repository], (name, image)
            seen.add(repository)
    # every image value the profile uses was seen, so each digest was checked (etcd: the replicated profile)
    etcd = {REPOSITORIES["etcd.image"], REPOSITORIES["etcd.initImage"]}
    assert seen == set(by_repository) - (etcd if profile == "default" else set())


@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_without_digests_every_image_is_a_pinned_tag(profile: str) -> None:
    m = Manifests(template(*PROFILES[profile], *EVERYTHING))
    for name, pod in pod_specs(m).items():
        assert "imagePullSecrets" not in pod, name  # none asked for: none rendered
        for image in images(pod):
            assert "@" not in image, (name, image)
            repository, _, tag = image.rpartition(":")
            assert repository in REPOSITORIES.values() and tag, (name, image)
            # a patch release, not a floating minor ("7.4-alpine") or latest
            assert tag != "latest" and tag.count(".") >= 2, (name, image)


def test_secrets_given_once_are_rendered_once() -> None:
    m = Manifests(template("--set", "global.imagePullSecrets={regcred}", "--set", "image.pullSecrets={regcred}"))
    for name, pod in pod_specs(m).items():
        assert pod["imagePullSecrets"] == [{"name": "regcred"}], name
