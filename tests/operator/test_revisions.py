"""Which pods are outdated (chain_operator/revisions.py), and what a first install looks like to `upgrade.step`:
pods the controller has not created yet are not a rollout."""

from __future__ import annotations

import kopf

from chain_operator.config import OperatorConfig
from chain_operator.kube import KubeApi
from chain_operator.nodes import PodView
from chain_operator.revisions import REVISION_LABEL, is_current, outdated, settled, update_revision
from chain_operator.spec import Network, parse_spec
from chain_operator.upgrade import pending, step
from tests.fixtures.kubecluster import PODS, STATEFULSETS
from tests.operator.conftest import NAMESPACE, network, statefulset

IMAGE = "registry.test/chain-node:1.1"


def pod(revision: str, image: str = IMAGE) -> PodView:
    return PodView("p", "127.0.0.1", True, image, 1, 2, revision=revision)


def test_a_pod_is_current_when_its_revision_and_image_are_the_templates() -> None:
    assert is_current(pod("r2"), IMAGE, "r2")
    assert not is_current(pod("r1"), IMAGE, "r2")  # a label, a value, an annotation changed
    assert not is_current(pod("r2", "registry.test/chain-node:1.0"), IMAGE, "r2")
    assert is_current(pod(""), IMAGE, "r2") and is_current(pod("r1"), IMAGE, "")  # unknown: the image decides
    assert not is_current(None, IMAGE, "r2")
    pods = [pod("r1"), None, pod("r2")]
    assert outdated(pods, IMAGE, "r2") == [0]  # the missing pod is being created, not outdated
    assert settled(pods, IMAGE, "r2") == 2  # ... nor current: nothing is lowered past it
    assert settled([pod("r1"), pod("r2"), pod("r2")], IMAGE, "r2") == 1


def test_an_update_revision_older_than_the_spec_is_not_trusted() -> None:
    behind = {"metadata": {"generation": 3}, "status": {"observedGeneration": 2, "updateRevision": "r1"}}
    assert update_revision(behind) == ""
    assert update_revision({**behind, "status": {"observedGeneration": 3, "updateRevision": "r1"}}) == "r1"


async def test_a_first_install_before_its_pods_exist_is_up_to_date_and_held(cluster) -> None:
    cluster.objects[STATEFULSETS, NAMESPACE, "chain-node"] = statefulset(
        IMAGE, 2, 0, status={"updateRevision": "chain-node-1"}
    )
    kube = KubeApi(kopf.ConnectionInfo(server=str(cluster.url)))
    try:
        net = Network(NAMESPACE, "main", "uid-main", parse_spec(network("main", "1.1", 2)["spec"]))
        result = await step(kube, OperatorConfig(namespaces=(NAMESPACE,)), net, {})
        assert result.done and result.status == {"currentVersion": "1.1"}
        assert [c.reason.value for c in result.conditions] == ["UpToDate", "UpToDate"]
        held = cluster.objects[STATEFULSETS, NAMESPACE, "chain-node"].raw["spec"]["updateStrategy"]
        assert held["rollingUpdate"]["partition"] == 2
    finally:
        await kube.close()


async def test_a_spec_the_controller_has_not_observed_is_pending_and_moves_nothing(cluster) -> None:
    """A render just applied (generation 3, status about 2): the pods judged by the old revision look current,
    yet the nodes are not done, so neither their rollout nor the read replicas' may go on from it."""
    body = statefulset(IMAGE, 1, 1, status={"updateRevision": "r1", "observedGeneration": 2}, generation=3)
    cluster.objects[STATEFULSETS, NAMESPACE, "chain-node"] = body
    cluster.objects[PODS, NAMESPACE, "chain-node-0"] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "chain-node-0", "namespace": NAMESPACE, "labels": {REVISION_LABEL: "r1"}},
        "spec": {"containers": [{"name": "node", "image": IMAGE}]},
        "status": {"podIP": "127.0.0.1", "conditions": [{"type": "Ready", "status": "True"}]},
    }
    kube = KubeApi(kopf.ConnectionInfo(server=str(cluster.url)))
    config = OperatorConfig(namespaces=(NAMESPACE,))
    try:
        net = Network(NAMESPACE, "main", "uid-main", parse_spec(network("main", "1.1", 1)["spec"]))
        assert await pending(kube, config, net)
        waiting = await step(kube, config, net, {})
        assert not waiting.done and waiting.status == {} and waiting.wait > 0
        cluster.objects[STATEFULSETS, NAMESPACE, "chain-node"] = {
            **body,
            "status": {**body["status"], "observedGeneration": 3},
        }
        assert not await pending(kube, config, net)  # observed: r1 is the template's revision, the pod runs it
    finally:
        await kube.close()
