"""The node's listeners, each started onto the node's exit stack: its stop is registered as it starts, so a
stop (or a start that fails half way) closes them in the reverse order.

The public surface: native gRPC on --grpc-addr (with read workers, node/server/readers, the workers listen
there and this process holds the port with bound, never-listening SO_REUSEPORT sockets, docs/node.md "Read
workers") and gRPC-web on --web-addr: ChainService, KeychainService, health and a reflection listing only
those. The internal listener (--internal-addr): ChainService with the member proof honoured,
ReadBatchService, SnapshotSyncService, health and the reflection of all, under TLS only for clients with a
certificate of the cluster's CA; AdminService on --admin-addr, likewise (docs/security.md).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass

import grpc
from grpc_health.v1 import health, health_pb2_grpc

from chain.v1 import (
    admin_service_pb2_grpc,
    keychain_service_pb2,
    keychain_service_pb2_grpc,
    service_pb2,
    service_pb2_grpc,
    snapshot_sync_service_pb2,
    snapshot_sync_service_pb2_grpc,
)
from node.grpcweb.server import MethodHandlers, grpc_web_app, serve_grpc_web
from node.listen import GRPC_EXCLUSIVE, grpc_add_port
from node.server.config import NodeConfig
from node.server.readers.local import local_paths
from node.server.readers.sharing import PortAnchor, private_target
from node.server.readers.supervisor import ReadWorkers
from node.server.readers.worker import WorkerSettings
from node.server.reflection import add_reflection_to_server, reflection_servicer
from node.server.rpc.admin import AdminServicer
from node.server.rpc.interceptors import ErrorInterceptor, Interceptor, TokenInterceptor
from node.server.rpc.read_batch import add_read_batch, intercepted
from node.server.rpc.servicer import ChainServicer, KeychainServicer, NodeState
from node.server.rpc.status import to_status
from node.server.snapshots import SnapshotManager
from node.server.snapshots.jobs import SnapshotJobs
from node.server.snapshots.sync_server import SnapshotSyncServicer
from node.server.telemetry.node_metrics import NodeMetrics
from node.server.telemetry.rpc import RpcMetricsInterceptor, grpc_web_metrics
from node.server.transport import NodeTLS

CHAIN_SERVICE = service_pb2.DESCRIPTOR.services_by_name["ChainService"].full_name
KEYCHAIN_SERVICE = keychain_service_pb2.DESCRIPTOR.services_by_name["KeychainService"].full_name
SYNC_SERVICE = snapshot_sync_service_pb2.DESCRIPTOR.services_by_name["SnapshotSyncService"].full_name
REFLECTED = (CHAIN_SERVICE, KEYCHAIN_SERVICE, health.SERVICE_NAME)  # and both reflection services
READ_BATCH_SERVICE = "chain.v1.ReadBatchService"
INTERNAL_REFLECTED = (*REFLECTED, READ_BATCH_SERVICE, SYNC_SERVICE)
GRACE = 1.0  # seconds a stopping server lets calls in progress finish


@dataclass
class Ports:
    grpc: int
    web: int
    admin: int
    metrics: int = 0
    internal: int = 0


class Listeners:
    def __init__(
        self,
        config: NodeConfig,
        tls: NodeTLS,
        health_servicer: health_pb2_grpc.HealthServicer,
        metrics: NodeMetrics | None,
        ports: Ports,
    ) -> None:
        self.config = config
        self.tls = tls
        self.health = health_servicer
        self.metrics = metrics
        self.ports = ports

    def _interceptors(self) -> list[Interceptor]:
        interceptors: list[Interceptor] = [ErrorInterceptor()]
        if self.metrics is not None:  # outside the error mapping: it reads the final status and reason code
            interceptors.insert(0, RpcMetricsInterceptor(self.metrics))
        return interceptors

    def _server(self, interceptors: list[Interceptor]) -> grpc.aio.Server:
        cfg = self.config
        options: list[tuple[str, object]] = [
            ("grpc.max_receive_message_length", cfg.max_message_bytes * (cfg.max_batch + 1)),
            ("grpc.max_send_message_length", 64 * 1024 * 1024),
            GRPC_EXCLUSIVE,
        ]
        return grpc.aio.server(interceptors=interceptors, options=options)

    async def _serve(self, stack: AsyncExitStack, server: grpc.aio.Server) -> None:
        await server.start()
        stack.push_async_callback(server.stop, GRACE)

    async def public(
        self, stack: AsyncExitStack, state: NodeState, chain: ChainServicer, readers: int
    ) -> ReadWorkers | None:
        """The public gRPC server; with `readers` workers, it listens only on a private address they relay
        to, and they listen on --grpc-addr (returned, started)."""
        cfg = self.config
        server = self._server(self._interceptors())
        service_pb2_grpc.add_ChainServiceServicer_to_server(chain, server)
        keychain_service_pb2_grpc.add_KeychainServiceServicer_to_server(KeychainServicer(state), server)
        health_pb2_grpc.add_HealthServicer_to_server(self.health, server)
        add_reflection_to_server(reflection_servicer(REFLECTED), server)
        private = private_target()
        if readers:  # the workers listen on the public address; this process holds it
            anchor = PortAnchor.bind("--grpc-addr", cfg.grpc_addr)
            stack.callback(anchor.close)  # after the server and the workers stopped
            self.ports.grpc = anchor.port
            grpc_add_port(server, "--read-workers", private)  # a private socket: plaintext
        else:
            self.ports.grpc = grpc_add_port(server, "--grpc-addr", cfg.grpc_addr, self.tls.public_credentials())
        await self._serve(stack, server)
        if not readers:
            return None
        workers = ReadWorkers(
            readers,
            self._worker_settings(private),
            self.metrics.rpc_duration if self.metrics is not None else None,
            on_exit=state.chain.store.clear_stale_readers,  # a killed worker's read transaction
        )
        if self.metrics is not None:
            self.metrics.observe_read_workers(workers)
        await workers.start()
        stack.push_async_callback(workers.stop)  # before the main server: their relayed calls end on it
        return workers

    def _worker_settings(self, private: str) -> Callable[[int], WorkerSettings]:
        cfg = self.config
        host = cfg.grpc_addr.rpartition(":")[0]
        receive = cfg.max_message_bytes * (cfg.max_batch + 1)

        def settings(index: int) -> WorkerSettings:
            return WorkerSettings(
                index,
                str(cfg.data_dir),
                f"{host}:{self.ports.grpc}",
                private,
                receive,
                self.metrics is not None,
                cfg.log_level,
                cfg.log_format,
                cfg.read_answer_bytes,
                str(cfg.tls_cert or ""),
                str(cfg.tls_key or ""),
            )

        return settings

    async def internal(self, stack: AsyncExitStack, state: NodeState, snapshots: SnapshotManager) -> None:
        """The listener for the cluster's members and gateways: forwarded batches (the member proof honoured
        from a peer with a certificate of the cluster's CA), read batches, state sync, a --follow upstream."""
        cfg = self.config
        interceptors = self._interceptors()
        server = self._server(interceptors)
        internal_chain = ChainServicer(state, internal=True)
        keychain = KeychainServicer(state)
        service_pb2_grpc.add_ChainServiceServicer_to_server(internal_chain, server)
        keychain_service_pb2_grpc.add_KeychainServiceServicer_to_server(keychain, server)
        reads = MethodHandlers.collect(  # ReadBatch (node/server/rpc/read_batch.py), for the gateways
            ((service_pb2_grpc.add_ChainServiceServicer_to_server, internal_chain),
             (keychain_service_pb2_grpc.add_KeychainServiceServicer_to_server, keychain))
        )  # fmt: skip
        batched = await intercepted({p: reads.registered[p] for p in local_paths()}, interceptors[::-1])
        batches = add_read_batch(server, batched)
        health_pb2_grpc.add_HealthServicer_to_server(self.health, server)
        sync = SnapshotSyncServicer(snapshots, rate=cfg.state_sync_rate)  # members state-sync from each other
        snapshot_sync_service_pb2_grpc.add_SnapshotSyncServiceServicer_to_server(sync, server)
        add_reflection_to_server(reflection_servicer(INTERNAL_REFLECTED), server)
        self.ports.internal = grpc_add_port(server, "--internal-addr", cfg.internal_addr, self.tls.mutual_credentials())
        await self._serve(stack, server)
        # before the server stops: the gateways' read streams end, and what they had waiting comes as calls
        stack.callback(batches.close)

    async def admin(self, stack: AsyncExitStack, snapshots: SnapshotManager, jobs: SnapshotJobs) -> None:
        """AdminService on --admin-addr: under TLS only for clients with a certificate of the cluster's CA."""
        cfg = self.config
        interceptors: list[Interceptor] = [ErrorInterceptor()]
        if cfg.admin_token:
            interceptors.insert(0, TokenInterceptor(cfg.admin_token))
        server = grpc.aio.server(interceptors=interceptors, options=[GRPC_EXCLUSIVE])
        admin_service_pb2_grpc.add_AdminServiceServicer_to_server(AdminServicer(snapshots, jobs), server)
        self.ports.admin = grpc_add_port(server, "--admin-addr", cfg.admin_addr, self.tls.mutual_credentials())
        await self._serve(stack, server)

    async def web(self, stack: AsyncExitStack, state: NodeState, chain: ChainServicer) -> None:
        """gRPC-web over HTTP/1.1 on --web-addr: the public services."""
        app = grpc_web_app(
            [
                (service_pb2_grpc.add_ChainServiceServicer_to_server, chain),
                (keychain_service_pb2_grpc.add_KeychainServiceServicer_to_server, KeychainServicer(state)),
                (health_pb2_grpc.add_HealthServicer_to_server, self.health),
                (add_reflection_to_server, reflection_servicer(REFLECTED)),
            ],
            cors_origins=self.config.cors_origins,
            error_mapper=to_status,
        )
        if self.metrics is not None:
            app.middlewares.append(grpc_web_metrics(self.metrics))
        host, _, port = self.config.web_addr.rpartition(":")
        runner, self.ports.web = await serve_grpc_web(
            app, host or "localhost", int(port), ssl_context=self.tls.web_context()
        )
        stack.push_async_callback(runner.cleanup)
