import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from typing import Any

import kmock
import pytest

from chain_operator.config import OperatorConfig
from chain_operator.main import run_operator
from tests.fixtures.kubecluster import NETWORKS, declare_resources, kubeconfig

NAMESPACE = "chain"


@pytest.fixture
def cluster(kmock: kmock.KubernetesEmulator, tmp_path, monkeypatch) -> kmock.KubernetesEmulator:
    """kmock with the operator's resources declared, and a kubeconfig pointing at it (KUBECONFIG)."""
    declare_resources(kmock)
    path = tmp_path / "kubeconfig"
    path.write_text(kubeconfig(str(kmock.url).rstrip("/"), NAMESPACE))
    monkeypatch.setenv("KUBECONFIG", str(path))
    return kmock


OperatorFactory = Callable[..., Any]


@pytest.fixture
async def start_operator(cluster) -> AsyncIterator[OperatorFactory]:
    """Start the real operator (kopf, in this event loop) with a config; stopped at teardown."""
    running: list[tuple[asyncio.Event, asyncio.Task[None]]] = []

    async def start(**overrides: Any) -> Callable[[], Any]:
        """Start one operator; returns a coroutine function that stops it (an operator restart)."""
        # The doubles' nodes are independent solo chains: their heights never converge after a restart, so
        # the lag gate is opened wide here and exercised on its own in test_rollout_gates.py.
        base = OperatorConfig(
            namespaces=(NAMESPACE,),
            snapshot_tick=0.3,
            upgrade_poll=0.2,
            rpc_timeout=5.0,
            max_lag_blocks=1_000_000,
            stable_checks=3,
            stable_interval=0.3,
            rollout_check=0.5,
        )
        stop = asyncio.Event()
        task = asyncio.create_task(run_operator(replace(base, **overrides), stop_flag=stop))
        running.append((stop, task))

        async def halt() -> None:
            stop.set()
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait_for(task, 30)

        return halt

    yield start
    for stop, task in running:
        stop.set()
        if not task.done():
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait_for(task, 30)


def network(
    name: str, version: str, replicas: int, every: str = "", retention: int = 3, digest: str = ""
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "chain.dev/v1",
        "kind": "ChainNetwork",
        # kmock keeps no resourceVersion of its own; kopf's JSON patches test the one they saw.
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "uid": f"uid-{name}",
            "generation": 1,
            "resourceVersion": "1",
        },
        "spec": {
            "statefulSet": "chain-node",
            "container": "node",
            "image": "registry.test/chain-node",
            "version": version,
            "replicas": replicas,
            "snapshots": {"every": every, "retention": retention},
        },
    }
    if digest:
        body["spec"]["digest"] = digest
    return body


def statefulset(
    image: str, replicas: int, partition: int, *, status: dict[str, Any] | None = None, generation: int | None = None
) -> dict[str, Any]:
    """A node StatefulSet `chain-node` (container `node`) as the API would hold it; `status` as its controller
    reported it, `generation` in its metadata when given."""
    body: dict[str, Any] = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "chain-node", "namespace": NAMESPACE},
        "spec": {
            "replicas": replicas,
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": partition}},
            "template": {"spec": {"containers": [{"name": "node", "image": image}]}},
        },
    }
    if generation is not None:
        body["metadata"]["generation"] = generation
    if status is not None:
        body["status"] = status
    return body


async def create_network(k: kmock.KubernetesEmulator, body: dict[str, Any]) -> None:
    """Create through the API (so watchers see it), as kubectl would."""
    url = f"/apis/chain.dev/v1/namespaces/{NAMESPACE}/chainnetworks"
    resp = await k.post(url, json=body)
    assert resp.status == 201 or resp.status == 200, await resp.text()


async def patch_network(k: kmock.KubernetesEmulator, name: str, body: dict[str, Any]) -> None:
    url = f"/apis/chain.dev/v1/namespaces/{NAMESPACE}/chainnetworks/{name}"
    resp = await k.patch(url, json=body, headers={"content-type": "application/merge-patch+json"})
    assert resp.status == 200, await resp.text()


def network_status(k: kmock.KubernetesEmulator, name: str) -> dict[str, Any]:
    status: dict[str, Any] = k.objects[NETWORKS, NAMESPACE, name].raw.get("status", {})
    return status


async def eventually(check: Callable[[], Any], timeout: float = 60.0, what: str = "") -> Any:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        value = check()
        if value:
            return value
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what or check}")
        await asyncio.sleep(0.1)
