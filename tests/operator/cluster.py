"""A namespace in kmock (the Kubernetes API) whose node pods are real chain-node processes.

kmock stores objects but runs no controllers, so this module plays the two a node StatefulSet needs:
the StatefulSet controller and the kubelet. `StatefulSetDouble` keeps one pod object per ordinal in kmock
and one real `chain-node` process per pod (its data dir is the pod's volume and survives replacement).
When the StatefulSet's template image differs from a pod's and the pod's ordinal is >= the partition, it
replaces that pod the way Kubernetes does: the pod turns not Ready, the process stops, a new process
starts on the same data dir, and the pod comes back Ready with the new image and the new process's ports.
An image whose tag is in `crashing_tags` gets a process that exits at start (a CrashLoopBackOff pod: new
image, never Ready).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import kmock
import yaml

from tests.node.server.nodeproc import NodeProcess

ROOT = Path(__file__).resolve().parents[2]
CRDS = ROOT / "charts" / "chain" / "crds"
STATEFULSETS = "apps/v1/statefulsets"
PODS = "v1/pods"
NETWORKS = "chain.dev/v1/chainnetworks"
SNAPSHOTS = "chain.dev/v1/chainsnapshots"
log = logging.getLogger("tests.operator.cluster")


def crd_documents() -> list[dict[str, Any]]:
    return [yaml.safe_load(p.read_text()) for p in sorted(CRDS.glob("*.yaml"))]


def declare_resources(k: kmock.KubernetesEmulator) -> None:
    """Serve discovery for what the operator uses; the custom resources come from the chart's CRDs."""
    for crd in crd_documents():
        spec = crd["spec"]
        for version in spec["versions"]:
            k.resources[f"{spec['group']}/{version['name']}/{spec['names']['plural']}"] = kmock.ResourceInfo(
                kind=spec["names"]["kind"],
                singular=spec["names"]["singular"],
                namespaced=spec["scope"] == "Namespaced",
                verbs={"list", "watch", "get", "create", "patch", "delete"},
                subresources=set(version.get("subresources", {})),
            )
    k.resources[STATEFULSETS] = kmock.ResourceInfo(kind="StatefulSet", singular="statefulset", namespaced=True)
    k.resources[PODS] = kmock.ResourceInfo(kind="Pod", singular="pod", namespaced=True)
    k.resources["v1/events"] = kmock.ResourceInfo(kind="Event", singular="event", namespaced=True)
    # kopf's own backbone: it looks for namespaces and CRDs before it starts watching.
    k.resources["v1/namespaces"] = kmock.ResourceInfo(kind="Namespace", singular="namespace", namespaced=False)
    k.resources["apiextensions.k8s.io/v1/customresourcedefinitions"] = kmock.ResourceInfo(
        kind="CustomResourceDefinition", singular="customresourcedefinition", namespaced=False
    )


def kubeconfig(server: str, namespace: str) -> str:
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "kmock", "cluster": {"server": server}}],
        "users": [{"name": "operator", "user": {"token": "test-token"}}],
        "contexts": [{"name": "kmock", "context": {"cluster": "kmock", "user": "operator", "namespace": namespace}}],
        "current-context": "kmock",
    }
    return str(yaml.safe_dump(doc))


def live(k: kmock.KubernetesEmulator, resource: str, namespace: str) -> dict[str, dict[str, Any]]:
    """name -> raw object of every not-deleted object of a resource in a namespace."""
    out: dict[str, dict[str, Any]] = {}
    for (res, ns, name), obj in list(k.objects.items()):
        if str(res.plural) == resource.rsplit("/", 1)[-1] and ns == namespace and not obj.deleted:
            out[name] = obj.raw
    return out


def ever_created(k: kmock.KubernetesEmulator, resource: str, namespace: str) -> set[str]:
    return {
        name
        for (res, ns, name), _ in list(k.objects.items())
        if str(res.plural) == resource.rsplit("/", 1)[-1] and ns == namespace
    }


class StatefulSetDouble:
    def __init__(
        self,
        k: kmock.KubernetesEmulator,
        namespace: str,
        name: str,
        image: str,
        replicas: int,
        workdir: Path,
        crashing_tags: Iterable[str] = (),
        node_args: Iterable[str] = (),
    ) -> None:
        self.k = k
        self.namespace = namespace
        self.name = name
        self.replicas = replicas
        self.workdir = workdir
        self.crashing_tags = set(crashing_tags)
        self.node_args = tuple(node_args)
        self.procs: dict[int, NodeProcess | None] = {}
        self.replaced: list[tuple[str, str]] = []  # (pod, image) in order of replacement
        self._task: asyncio.Task[None] | None = None
        self.k.objects[STATEFULSETS, namespace, name] = {
            "apiVersion": "apps/v1",
            "kind": "StatefulSet",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "replicas": replicas,
                "serviceName": f"{name}-headless",
                "selector": {"matchLabels": {"app.kubernetes.io/component": "node"}},
                "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}},
                "template": {"spec": {"containers": [{"name": "node", "image": image}]}},
            },
        }

    # ---- pods ----
    def pod_name(self, ordinal: int) -> str:
        return f"{self.name}-{ordinal}"

    def statefulset(self) -> dict[str, Any]:
        raw: dict[str, Any] = self.k.objects[STATEFULSETS, self.namespace, self.name].raw
        return copy.deepcopy(raw)

    def pod(self, ordinal: int) -> dict[str, Any]:
        raw: dict[str, Any] = self.k.objects[PODS, self.namespace, self.pod_name(ordinal)].raw
        return copy.deepcopy(raw)

    def pod_image(self, ordinal: int) -> str:
        return str(self.pod(ordinal)["spec"]["containers"][0]["image"])

    def _put_pod(self, ordinal: int, image: str, proc: NodeProcess | None) -> None:
        ports = []
        if proc is not None:
            ports = [
                {"name": "grpc", "containerPort": proc.ready["grpc_port"]},
                {"name": "admin", "containerPort": proc.ready["admin_port"]},
            ]
        self.k.objects[PODS, self.namespace, self.pod_name(ordinal)] = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": self.pod_name(ordinal),
                "namespace": self.namespace,
                "labels": {"app.kubernetes.io/component": "node"},
            },
            "spec": {"containers": [{"name": "node", "image": image, "ports": ports}]},
            "status": {
                "podIP": "127.0.0.1" if proc is not None else "",
                "conditions": [{"type": "Ready", "status": "True" if proc is not None else "False"}],
            },
        }

    def _run_node(self, ordinal: int, image: str, must_start: bool = False) -> NodeProcess | None:
        args = list(self.node_args)
        if image.rsplit(":", 1)[-1] in self.crashing_tags:
            args += ["--network", "not-a-network"]  # the process exits during start, like a bad release
        proc = NodeProcess(self.workdir / self.pod_name(ordinal), "--web-addr", "", "--verify-workers", "0", *args)
        try:
            return proc.start()
        except RuntimeError:
            proc.stop()
            if must_start:
                raise
            return None

    async def start(self) -> None:
        image = self.statefulset()["spec"]["template"]["spec"]["containers"][0]["image"]
        ordinals = range(self.replicas)
        procs = await asyncio.gather(*(asyncio.to_thread(self._run_node, i, image, True) for i in ordinals))
        for ordinal, proc in zip(ordinals, procs, strict=True):
            assert proc is not None
            self.procs[ordinal] = proc
            self._put_pod(ordinal, image, proc)
        self._task = asyncio.create_task(self._control())

    async def _replace(self, ordinal: int, image: str) -> None:
        old = self.procs.get(ordinal)
        self._put_pod(ordinal, self.pod_image(ordinal), None)  # terminating: not Ready
        if old is not None:
            await asyncio.to_thread(old.stop)
        self.procs[ordinal] = None
        self._put_pod(ordinal, image, None)  # the new pod exists before its container is ready
        proc = await asyncio.to_thread(self._run_node, ordinal, image)
        self.procs[ordinal] = proc
        self._put_pod(ordinal, image, proc)
        self.replaced.append((self.pod_name(ordinal), image))
        log.info("replaced %s with %s (%s)", self.pod_name(ordinal), image, "ready" if proc else "crashing")

    async def _control(self) -> None:
        while True:
            sts = self.statefulset()
            template = sts["spec"]["template"]["spec"]["containers"][0]["image"]
            partition = int(sts["spec"].get("updateStrategy", {}).get("rollingUpdate", {}).get("partition", 0))
            # Like the StatefulSet controller: highest ordinal first, one pod at a time.
            for ordinal in reversed(range(self.replicas)):
                if ordinal >= partition and self.pod_image(ordinal) != template:
                    await self._replace(ordinal, template)
                    break
            await asyncio.sleep(0.1)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        for proc in self.procs.values():
            if proc is not None:
                await asyncio.to_thread(proc.stop)
