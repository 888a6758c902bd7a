"""Talking to one node pod over gRPC: health, height, and the AdminService snapshot calls.

A pod's addresses come from the pod itself: `status.podIP` and the container ports named `grpc` and
`admin` of the node container. Nothing is guessed from DNS names, so the same code works in a cluster and
against pods whose ports are whatever a test's nodes bound.

With `--node-ca-file` every call is TLS: the pod's certificate must chain to that CA and name the pod (by
default `{pod}.{subdomain}.{namespace}.svc`, its name under the StatefulSet's headless Service, from the pod's
own `spec.hostname`/`spec.subdomain`), and the admin listener gets the operator's client certificate. The admin
token goes only over TLS or to a loopback address: a call that would send it in plaintext across the network
is not made (`AdminTokenNeedsTLS`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from chain.v1 import admin_service_pb2, admin_service_pb2_grpc, rpc_pb2, service_pb2_grpc
from chain_operator.conditions import ConditionReason
from chain_operator.config import OperatorConfig
from chain_operator.errors import NodeUnreachable
from chain_operator.kube import Obj
from node.tls import ClientTLS, aio_channel, is_loopback, tls_failure

HEALTH_SERVICE = "chain.v1.ChainService"


@dataclass(frozen=True)
class PodView:
    """What the operator reads from a pod object."""

    name: str
    ip: str
    ready: bool
    image: str
    grpc_port: int
    admin_port: int
    namespace: str = ""
    hostname: str = ""  # spec.hostname (a StatefulSet's pod: its name)
    subdomain: str = ""  # spec.subdomain (a StatefulSet's pod: its headless Service)
    revision: str = ""  # the controller-revision-hash label: the StatefulSet revision the pod was made from

    def server_name(self, template: str) -> str:
        """The name its certificate must carry ("" = the IP dialled)."""
        host = self.hostname or self.name
        if template:
            return template.format(pod=host, subdomain=self.subdomain, namespace=self.namespace)
        return f"{host}.{self.subdomain}.{self.namespace}.svc" if self.subdomain else ""

    @property
    def grpc_target(self) -> str:
        return f"{self.ip}:{self.grpc_port}"

    @property
    def admin_target(self) -> str:
        return f"{self.ip}:{self.admin_port}"


def pod_view(pod: Obj, container: str) -> PodView:
    meta, spec, status = pod.get("metadata", {}), pod.get("spec", {}), pod.get("status", {})
    ports: dict[str, int] = {}
    image = ""
    for c in spec.get("containers", []):
        if c.get("name") == container:
            image = c.get("image", "")
            ports = {p["name"]: int(p["containerPort"]) for p in c.get("ports", []) if "name" in p}
    ready = any(cond.get("type") == "Ready" and cond.get("status") == "True" for cond in status.get("conditions", []))
    return PodView(
        name=meta.get("name", ""),
        ip=status.get("podIP", ""),
        ready=ready,
        image=image,
        grpc_port=ports.get("grpc", 50051),
        admin_port=ports.get("admin", 50053),
        namespace=meta.get("namespace", ""),
        hostname=spec.get("hostname", ""),
        subdomain=spec.get("subdomain", ""),
        revision=str((meta.get("labels") or {}).get("controller-revision-hash", "")),
    )


class NodeClient:
    """gRPC calls to one pod; each call opens and closes its own channel (they are rare), so renewed client
    certificate files are read at the next call."""

    def __init__(self, pod: PodView, config: OperatorConfig) -> None:
        self.pod = pod
        self.timeout = config.rpc_timeout
        tls = config.node_tls()
        self.tls: ClientTLS | None = (
            replace(tls, server_name=pod.server_name(config.node_server_name)) if tls is not None else None
        )
        self.admin_token = config.admin_token

    @property
    def metadata(self) -> Sequence[tuple[str, str]]:
        """The admin call's bearer token; refused over plaintext beyond loopback (it would cross the network
        readable by anyone on the path)."""
        if not self.admin_token:
            return ()
        if self.tls is None and not is_loopback(self.pod.ip):
            raise NodeUnreachable(
                f"{self.pod.name}: not sending the admin token in plaintext to {self.pod.admin_target}: "
                "give the operator --node-ca-file (TLS to the pods)",
                delay=60.0,
                reason=ConditionReason.ADMIN_TOKEN_NEEDS_TLS,
            )
        return (("authorization", f"Bearer {self.admin_token}"),)

    def _channel(self, target: str) -> grpc.aio.Channel:
        return aio_channel(target, self.tls, secure=self.tls is not None)

    def _unreachable(self, what: str, err: grpc.RpcError) -> NodeUnreachable:
        code = err.code() if isinstance(err, grpc.aio.AioRpcError) else None
        name = code.name if code is not None else "UNKNOWN"
        details = err.details() if isinstance(err, grpc.aio.AioRpcError) else ""
        if self.tls is not None and (tls_failure(details) or "hostname verification" in (details or "").lower()):
            name = (
                f"TLS handshake failed (CA {self.tls.ca_file}, name {self.tls.server_name or self.pod.ip}): "
                f"{' '.join((details or '').split()[-10:])}"
            )
        return NodeUnreachable(f"{self.pod.name}: {what} failed: {name}", delay=5.0)

    async def serving(self) -> bool:
        if not self.pod.ip:
            return False
        async with self._channel(self.pod.grpc_target) as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            try:
                answer = await stub.Check(health_pb2.HealthCheckRequest(service=HEALTH_SERVICE), timeout=self.timeout)
            except grpc.RpcError:
                return False
        return bool(answer.status == health_pb2.HealthCheckResponse.SERVING)

    async def height(self) -> int:
        async with self._channel(self.pod.grpc_target) as channel:
            stub = service_pb2_grpc.ChainServiceStub(channel)
            try:
                answer = await stub.GetNodeStatus(rpc_pb2.GetNodeStatusRequest(), timeout=self.timeout)
            except grpc.RpcError as err:
                raise self._unreachable("GetNodeStatus", err) from err
        return int(answer.status.block_height)

    async def start_snapshot(self) -> admin_service_pb2.StartSnapshotResponse:
        """Start a snapshot job on the node (or learn the one running); answers at once."""
        async with self._channel(self.pod.admin_target) as channel:
            stub = admin_service_pb2_grpc.AdminServiceStub(channel)
            try:
                return await stub.StartSnapshot(
                    admin_service_pb2.StartSnapshotRequest(), timeout=self.timeout, metadata=self.metadata
                )
            except grpc.RpcError as err:
                raise self._unreachable("StartSnapshot", err) from err

    async def snapshot_job(self, job_id: str) -> admin_service_pb2.SnapshotJob | None:
        """The job's state; None when the node does not know the id (it restarted since it started it)."""
        async with self._channel(self.pod.admin_target) as channel:
            stub = admin_service_pb2_grpc.AdminServiceStub(channel)
            try:
                answer = await stub.GetSnapshotJob(
                    admin_service_pb2.GetSnapshotJobRequest(id=job_id), timeout=self.timeout, metadata=self.metadata
                )
            except grpc.RpcError as err:
                if isinstance(err, grpc.aio.AioRpcError) and err.code() == grpc.StatusCode.NOT_FOUND:
                    return None
                raise self._unreachable("GetSnapshotJob", err) from err
        return answer.job

    async def delete_snapshot(self, name: str) -> bool:
        """Remove a snapshot from the pod's volume; False when the node no longer has it."""
        async with self._channel(self.pod.admin_target) as channel:
            stub = admin_service_pb2_grpc.AdminServiceStub(channel)
            try:
                await stub.DeleteSnapshot(
                    rpc_pb2.DeleteSnapshotRequest(name=name), timeout=self.timeout, metadata=self.metadata
                )
            except grpc.RpcError as err:
                if isinstance(err, grpc.aio.AioRpcError) and err.code() == grpc.StatusCode.NOT_FOUND:
                    return False
                raise self._unreachable("DeleteSnapshot", err) from err
        return True
