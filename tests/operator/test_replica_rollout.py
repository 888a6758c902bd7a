"""What one step of the read replicas' rollout decides (chain_operator/replica_rollout.py), from their StatefulSet,
their pods and the observations of nodes and replicas: the catch-up gate measured against the nodes' height, the
wait for the replica released last, a partition a render raised, the hold put back once every replica is current.
(The whole rollout, after the nodes and one at a time, runs in test_chart_rolls.py.)"""

from __future__ import annotations

import datetime
from typing import Any, cast

import pytest

from chain_operator import replica_rollout
from chain_operator.config import OperatorConfig
from chain_operator.errors import KubeNotFound, SpecInvalid, UpgradeFailed
from chain_operator.gates import Member
from chain_operator.kube import KubeApi, Obj
from chain_operator.nodes import PodView
from chain_operator.spec import Network, parse_spec, parse_time
from chain_operator.upgrade import Step
from tests.operator.conftest import NAMESPACE, network

IMAGE = "registry.test/chain-node:1.1"
REPLICA = "chain-replica"
CONFIG = OperatorConfig(namespaces=(NAMESPACE,), max_lag_blocks=5, upgrade_poll=0.2)


class Kube:
    """The replicas' StatefulSet (get) and the partitions patched into it (merge_patch)."""

    def __init__(self, partition: int, replicas: int = 3) -> None:
        self.sts: Obj = {
            "metadata": {"name": REPLICA, "generation": 1},
            "spec": {
                "replicas": replicas,
                "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": partition}},
                "template": {"spec": {"containers": [{"name": "node", "image": IMAGE}]}},
            },
            "status": {"observedGeneration": 1, "updateRevision": "r2"},
        }
        self.partitions: list[int] = []

    async def get(self, path: str) -> Obj:
        if not path.endswith(f"/statefulsets/{REPLICA}"):
            raise KubeNotFound(404, path)
        return self.sts

    async def merge_patch(self, path: str, body: Obj) -> Obj:
        self.partitions.append(body["spec"]["updateStrategy"]["rollingUpdate"]["partition"])
        return self.sts


def net(read_replicas: str = REPLICA) -> Network:
    spec = {**network("main", "1.1", 2)["spec"], "readReplicas": {"statefulSet": read_replicas}}
    return Network(NAMESPACE, "main", "uid", parse_spec(spec))


def pod(name: str, revision: str) -> PodView:
    return PodView(name, "127.0.0.1", True, IMAGE, 1, 2, revision=revision)


def observed(monkeypatch: pytest.MonkeyPatch, revisions: list[str], heights: list[int], node_height: int = 100) -> None:
    """Replica ordinal i at revisions[i] and heights[i]; the nodes at `node_height`."""
    pods = [pod(f"{REPLICA}-{i}", r) for i, r in enumerate(revisions)]

    async def pod_views(kube: Any, n: Network, replicas: int) -> list[PodView | None]:
        assert n.spec.statefulset == REPLICA and replicas == len(revisions)
        return list(pods)

    async def observe(kube: Any, config: Any, n: Network, replicas: int) -> list[Member]:
        if n.spec.statefulset == REPLICA:
            return [Member(p.name, p, True, h) for p, h in zip(pods, heights, strict=True)]
        return [Member(f"chain-node-{i}", pod(f"chain-node-{i}", "n"), True, node_height) for i in range(replicas)]

    monkeypatch.setattr(replica_rollout, "pod_views", pod_views)
    monkeypatch.setattr(replica_rollout, "observe", observe)


async def step(kube: Kube, network: Network | None = None, status: dict[str, Any] | None = None) -> Step:
    return await replica_rollout.step(cast(KubeApi, kube), CONFIG, network or net(), status)


async def test_a_replica_behind_the_nodes_holds_the_release(monkeypatch: pytest.MonkeyPatch) -> None:
    kube = Kube(partition=3)
    observed(monkeypatch, ["r1", "r1", "r1"], [100, 94, 100])  # 6 blocks behind the nodes, max 5
    result = await step(kube)
    (cond,) = result.conditions
    assert (cond.reason, result.done, kube.partitions) == ("MemberLagging", False, [])
    assert f"{REPLICA}-1 is 6 blocks behind" in cond.message
    observed(monkeypatch, ["r1", "r1", "r1"], [100, 95, 100])  # within the lag of the nodes: released
    result = await step(kube)
    assert (result.conditions[0].reason, kube.partitions) == ("ReplacingPod", [2])
    record = result.status["replicaRollout"]  # the release, recorded: the pod and when
    assert record["pod"] == f"{REPLICA}-2" and parse_time(record["releasedAt"]) is not None


async def test_the_replica_released_last_must_be_back_before_the_next(monkeypatch: pytest.MonkeyPatch) -> None:
    kube = Kube(partition=2)
    observed(monkeypatch, ["r1", "r1", "r1"], [100, 100, 100])  # replica 2 released, not replaced yet
    result = await step(kube)
    assert (result.conditions[0].reason, kube.partitions) == ("WaitingForPod", [])
    observed(monkeypatch, ["r1", "r1", "r2"], [100, 100, 100])
    result = await step(kube)
    assert (result.conditions[0].reason, kube.partitions) == ("ReplacingPod", [1])


async def test_a_render_mid_rollout_is_lowered_back_and_the_hold_returns_at_the_end(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    kube = Kube(partition=3)  # a render put the hold back while replicas 1 and 2 were already current
    observed(monkeypatch, ["r1", "r2", "r2"], [100, 100, 100])
    await step(kube)
    assert kube.partitions == [1, 0]  # back to the settled ordinal (replacing nothing), then replica 0 released
    kube = Kube(partition=0)
    observed(monkeypatch, ["r2", "r2", "r2"], [100, 100, 100])
    result = await step(kube)
    assert (result.done, result.conditions[0].reason, kube.partitions) == (True, "Completed", [3])
    kube = Kube(partition=3)
    assert (await step(kube)).done and kube.partitions == []  # held and current: nothing to do


async def test_the_rollout_completes_only_once_the_replica_released_last_is_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    kube = Kube(partition=0)  # every pod at the template, replica 0 (released last) still catching up
    observed(monkeypatch, ["r2", "r2", "r2"], [80, 100, 100])
    result = await step(kube)
    assert (result.done, result.conditions[0].reason, kube.partitions) == (False, "WaitingForPod", [])
    assert f"{REPLICA}-0 is 20 blocks behind" in result.conditions[0].message
    observed(monkeypatch, ["r2", "r2", "r2"], [100, 100, 100])
    result = await step(kube)
    assert (result.done, result.conditions[0].reason, kube.partitions) == (True, "Completed", [3])


async def test_no_read_replicas_is_nothing_to_roll() -> None:
    kube = Kube(partition=0)
    assert (await step(kube, net("other-replica"))).done and kube.partitions == []  # no such StatefulSet
    plain = Network(NAMESPACE, "main", "uid", parse_spec(network("main", "1.1", 2)["spec"]))
    assert plain.spec.read_replicas == "" and (await step(kube, plain)).done


@pytest.mark.parametrize("bad", ["x", {"statefulSet": "Not_A_Name"}, {}])
def test_a_malformed_read_replicas_spec_is_refused(bad: object) -> None:
    with pytest.raises(SpecInvalid, match="readReplicas"):
        parse_spec({**network("main", "1.1", 2)["spec"], "readReplicas": bad})


def released(pod: str, seconds_ago: float) -> dict[str, Any]:
    at = datetime.datetime.now(tz=datetime.UTC) - datetime.timedelta(seconds=seconds_ago)
    return {"replicaRollout": {"pod": pod, "releasedAt": at.strftime("%Y-%m-%dT%H:%M:%SZ")}}


async def test_a_released_replica_that_does_not_come_back_within_the_pod_timeout_stops_the_rollout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    late = CONFIG.pod_timeout + 5
    kube = Kube(partition=2)
    observed(monkeypatch, ["r1", "r1", "r1"], [100, 100, 100])  # replica 2 released, still not at the template
    waiting = await step(kube, status=released(f"{REPLICA}-2", 10))
    assert (waiting.conditions[0].reason, waiting.done) == ("WaitingForPod", False)
    with pytest.raises(UpgradeFailed, match=f"read replica {REPLICA}-2 did not come back within"):
        await step(kube, status=released(f"{REPLICA}-2", late))
    assert (await step(kube, status=released(f"{REPLICA}-1", late))).conditions[0].reason == "WaitingForPod"
    kube = Kube(partition=0)  # every replica at the template, replica 0 (released last) never catches up
    observed(monkeypatch, ["r2", "r2", "r2"], [80, 100, 100])
    with pytest.raises(UpgradeFailed, match=f"{REPLICA}-0 did not come back .* 20 blocks behind"):
        await step(kube, status=released(f"{REPLICA}-0", late))
    observed(monkeypatch, ["r2", "r2", "r2"], [100, 100, 100])  # back: complete, and the record goes
    done = await step(kube, status=released(f"{REPLICA}-0", late))
    assert done.done and done.status == {"replicaRollout": None} and kube.partitions == [3]
