"""The node: wires the chain, mempool, pipeline, orderer, event hub and the servers.

    node = NodeApp(config); await node.start(); ...; await node.stop()

Listeners: the public surface, native gRPC and gRPC-web over HTTP/1.1 (ChainService, KeychainService,
health, and a reflection listing only those); the internal listener (`--internal-addr`: ChainService with
the member proof honoured, ReadBatchService, SnapshotSyncService, health, reflection of all), which requires a
client certificate of the cluster's CA under TLS; AdminService on its own address (docs/security.md).

Health (grpc.health.v1) has two meanings under distinct names: `liveness` is SERVING while the process and
its event loop answer (a lagging or halted member stays live: a restart would not help it); `readiness`
(and `""`, `chain.v1.ChainService`) is SERVING while the node serves, is caught up and can write its store,
and NOT_SERVING as soon as draining starts.

The one case a restart does help: a replicated member the etcd log was
compacted past while it ran. It sets `leaving` (why) and `left`; the serve loop
drains as on SIGTERM and exits with RESTART_EXIT_STATUS, and the next start
state-syncs (node/server/ordering/etcd/join.py).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import secrets
import socket
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from opentelemetry.trace import TracerProvider

from chain.v1 import (
    admin_service_pb2_grpc,
    keychain_service_pb2,
    keychain_service_pb2_grpc,
    message_pb2,
    service_pb2,
    service_pb2_grpc,
    snapshot_sync_service_pb2,
    snapshot_sync_service_pb2_grpc,
)
from node.chain import Chain
from node.errors import ConfigError, InvariantBroken, RestoreFailed, StoreRefused
from node.grpcweb.server import MethodHandlers, grpc_web_app, serve_grpc_web
from node.listen import GRPC_EXCLUSIVE, ListenError, check_free, grpc_add_port
from node.observability.metrics import MetricsEndpoint
from node.params import ChainParams
from node.server.config import NodeConfig
from node.server.devnet import AUTHORITY_FILE, bootstrap_message, new_devnet
from node.server.events import EventHub
from node.server.ordering.applier import BlockApplier
from node.server.ordering.etcd.client import EtcdClient
from node.server.ordering.etcd.genesis import agree_genesis, check_same, published_genesis
from node.server.ordering.etcd.join import join
from node.server.ordering.etcd.log import Keys
from node.server.ordering.etcd.replicated import ReplicatedOrderer, ReplicationSettings
from node.server.ordering.follower import FollowOrderer
from node.server.ordering.orderer import Orderer, SoloOrderer
from node.server.readers.local import local_paths
from node.server.readers.sharing import PortAnchor, PortLock, private_target
from node.server.readers.supervisor import ReadWorkers, read_worker_count
from node.server.readers.worker import WorkerSettings
from node.server.reflection import add_reflection_to_server, reflection_servicer
from node.server.rpc.admin import AdminServicer
from node.server.rpc.interceptors import ErrorInterceptor, Interceptor, TokenInterceptor
from node.server.rpc.read_batch import ReadBatchServicer, add_read_batch, intercepted
from node.server.rpc.servicer import ChainServicer, KeychainServicer, NodeState
from node.server.rpc.status import to_status
from node.server.snapshots import SnapshotManager, restore
from node.server.snapshots.jobs import SnapshotJobs
from node.server.snapshots.staging import Staging
from node.server.snapshots.sync_server import SnapshotSyncServicer
from node.server.storage_health import StorageHealth
from node.server.telemetry.node_metrics import NodeMetrics
from node.server.telemetry.rpc import RpcMetricsInterceptor, grpc_web_metrics
from node.server.telemetry.spans import NodeTelemetry
from node.server.transport import NodeTLS, etcd_tls, plaintext_line
from node.server.write.forwarding import Forwarder
from node.server.write.membership import MemberProof
from node.server.write.mempool import Mempool
from node.server.write.pipeline import Pipeline
from node.server.write.sizing import Resources, verify_worker_count
from node.server.write.verify import Verifier
from node.storage.fault import REMEDY_DAMAGED
from node.storage.identity import DATA_FILE, IDENTITY_FILE, LOCK_FILE, move_aside, network_name
from node.storage.integrity import REMEDY_FOREIGN, check_files, identity_of, is_fresh

log = logging.getLogger("chain.node")
CHAIN_SERVICE = service_pb2.DESCRIPTOR.services_by_name["ChainService"].full_name
KEYCHAIN_SERVICE = keychain_service_pb2.DESCRIPTOR.services_by_name["KeychainService"].full_name
SYNC_SERVICE = snapshot_sync_service_pb2.DESCRIPTOR.services_by_name["SnapshotSyncService"].full_name
LIVENESS = "liveness"
# Test hook: while the file this names exists, snapshot copies wait before they are published (tests stand a
# slow copy with it). Unset in production.
SNAPSHOT_HOLD_ENV = "CHAIN_TEST_SNAPSHOT_HOLD"
READINESS = "readiness"
READINESS_NAMES = ("", CHAIN_SERVICE, READINESS)  # "" and ChainService kept as they were documented
NETWORKS = MappingProxyType({"mainnet": message_pb2.NETWORK_MAINNET, "testnet": message_pb2.NETWORK_TESTNET})
STORE_FILES = (DATA_FILE, LOCK_FILE, IDENTITY_FILE, AUTHORITY_FILE)  # what --reinitialize moves aside
REFLECTED = (CHAIN_SERVICE, KEYCHAIN_SERVICE, health.SERVICE_NAME)  # and both reflection services
READ_BATCH_SERVICE = "chain.v1.ReadBatchService"
INTERNAL_REFLECTED = (*REFLECTED, READ_BATCH_SERVICE, SYNC_SERVICE)


def _reachable_host(listen_addr: str) -> str:
    """The host other members reach this node at: the listen host, or this host's address for a wildcard."""
    host = listen_addr.rpartition(":")[0].strip("[]")
    if host in ("", "0.0.0.0", "::"):
        return socket.gethostbyname(socket.gethostname())  # in Kubernetes: the pod's IP (/etc/hosts)
    return host


@dataclass
class Ports:
    grpc: int
    web: int
    admin: int
    metrics: int = 0
    internal: int = 0


class NodeApp:
    def __init__(self, config: NodeConfig, tracer_provider: TracerProvider | None = None) -> None:
        """`tracer_provider`: the process's (node.observability.tracing.Tracing, started before this app), or
        None for no spans. Metrics are served on `config.metrics_addr` while the node runs."""
        self.config = config
        self.ports = Ports(0, 0, 0)
        self.metrics_endpoint = MetricsEndpoint("chain-node", config.metrics_addr)
        self.metrics = NodeMetrics(self.metrics_endpoint) if self.metrics_endpoint.enabled else None
        self.telemetry = NodeTelemetry(tracer_provider, self.metrics)
        self.state: NodeState | None = None
        self._server: grpc.aio.Server | None = None
        self._batches: ReadBatchServicer | None = None  # closed before the server stops: its streams end
        self._admin: grpc.aio.Server | None = None
        self._internal: grpc.aio.Server | None = None
        self.tls = NodeTLS()  # read from the flags' files in start(): a bad file is one line, exit 2
        self._jobs: SnapshotJobs | None = None
        self._web_runner: object | None = None
        # the public asyncio servicer (grpc_health.v1.health.aio); the grpc-stubs typing predates it
        self._health = health.aio.HealthServicer()  # type: ignore[attr-defined]
        self.storage = StorageHealth()  # failing block commits: STORAGE_FAILED refusals, NOT_SERVING
        self._verifier: Verifier | None = None
        self._health_task: asyncio.Task[None] | None = None
        self._etcd: EtcdClient | None = None
        self._published: ChainParams | None = None  # genesis published in etcd (replicated mode)
        self.devnet_authority: str = ""
        self._readers_count = 0
        self._port_lock: PortLock | None = None
        self._anchor: PortAnchor | None = None
        self.readers: ReadWorkers | None = None
        self.leaving = ""  # why this node must restart (the serve loop drains and exits); "" while it need not
        self.left = asyncio.Event()

    # ---- lifecycle ----
    def _restore_local(self) -> None:
        """`--restore DIR`, or (replicated, empty data dir) the newest snapshot in --snapshot-dir: both staged,
        verified and renamed into place; without either, a leftover of an interrupted restore is removed."""
        cfg = self.config
        if cfg.restore is not None:
            info = restore(cfg.restore, cfg.data_dir, timeout=cfg.restore_timeout)
            log.info("restored snapshot %s at block %d", info.name, info.block_number)
        elif cfg.orderer == "etcd" and not (cfg.data_dir / "data.mdb").exists():
            newest = SnapshotManager(None, cfg.snapshots).latest()
            if newest is not None:  # a new member with an empty disk starts from the newest snapshot
                info = restore(cfg.snapshots / newest.name, cfg.data_dir, timeout=cfg.restore_timeout)
                log.info("empty data dir: restored the newest snapshot %s at block %d", info.name, info.block_number)
        elif cfg.orderer != "etcd":  # the replicated join resumes a state sync instead
            Staging(cfg.data_dir).discard()

    async def join(self) -> str:
        """Replicated: bring the data dir to a store the etcd log continues (state sync when it cannot);
        `chain-node state-sync` runs only this. Says what it did."""
        cfg = self.config
        self._restore_local()
        if self._etcd is None:
            self._etcd = EtcdClient(cfg.etcd_endpoints, tls=etcd_tls(cfg))
        keys = Keys(cfg.etcd_prefix.encode())
        node_id = self._node_id()
        tls = NodeTLS.from_config(cfg).members  # `chain-node state-sync` runs this alone, before start()
        try:
            done = await join(self._etcd, keys, cfg.data_dir, node_id=node_id, timeout=cfg.restore_timeout, tls=tls)
        except StoreRefused as refused:  # a damaged store: with --reinitialize, set aside and state-synced instead
            if not cfg.reinitialize:
                raise
            aside = move_aside(cfg.data_dir, STORE_FILES)
            log.warning("--reinitialize: %s; the old store was moved to %s", refused.problem, aside)
            done = await join(self._etcd, keys, cfg.data_dir, node_id=node_id, timeout=cfg.restore_timeout, tls=tls)
        # only a state sync is news; a store the log continues stays quiet (a refusal after it is one line)
        log.log(logging.INFO if done.startswith("state-synced") else logging.DEBUG, "join: %s", done)
        return done

    def _open_chain(self) -> tuple[Chain, bool]:
        cfg = self.config
        if cfg.orderer != "etcd":
            self._restore_local()
        try:
            return self._open_store()
        except StoreRefused as refused:
            if not cfg.reinitialize:
                raise
            aside = move_aside(cfg.data_dir, STORE_FILES)
            log.warning("--reinitialize: %s; the old store was moved to %s", refused.problem, aside)
            return self._open_store()

    def _open_store(self) -> tuple[Chain, bool]:
        """Open (or, in a directory that never held one, create) the store. StoreRefused when it is damaged,
        foreign or missing (docs/operations.md, "Store identity and integrity")."""
        cfg = self.config
        fresh = is_fresh(cfg.data_dir) and not (cfg.data_dir / AUTHORITY_FILE).exists()
        if is_fresh(cfg.data_dir) and not fresh:
            problem = f"{AUTHORITY_FILE} is here but no store (data.mdb deleted, or the first start stopped early)"
            raise StoreRefused(str(cfg.data_dir), problem, REMEDY_DAMAGED)
        if not fresh and not (cfg.data_dir / DATA_FILE).exists():
            check_files(cfg.data_dir)  # refuses: the directory held a store that is gone
        params: ChainParams | None = None
        bootstrap = False
        if cfg.genesis is not None:
            params = ChainParams.load(cfg.genesis)
        elif fresh and self._published is not None:
            params = self._published
        elif fresh and cfg.follow:
            raise ConfigError("a new --follow replica needs --restore SNAPSHOT or --genesis")
        elif fresh:
            if cfg.network != "devnet":
                raise ConfigError(f"a new {cfg.network} node needs --genesis")
            params, _ = new_devnet(cfg.data_dir)
            bootstrap = True
        chain = Chain.open(cfg.data_dir, params, tree_cache_nodes=cfg.tree_cache_nodes)
        if cfg.network != "devnet" and chain.params.network != NETWORKS[cfg.network]:
            held = network_name(chain.params.network)
            chain.close()
            raise StoreRefused(str(cfg.data_dir), f"holds a {held} chain, not {cfg.network}", REMEDY_FOREIGN)
        if (cfg.data_dir / AUTHORITY_FILE).exists():
            self.devnet_authority = str(cfg.data_dir / AUTHORITY_FILE)
        return chain, bootstrap

    async def _open_replicated(self) -> tuple[Chain, bool]:
        """Open the chain of an etcd member: its genesis must be the one published in etcd."""
        self._etcd = EtcdClient(self.config.etcd_endpoints, tls=etcd_tls(self.config))
        try:
            return await self._join_replicated(self._etcd)
        except (StoreRefused, RestoreFailed):
            await self._etcd.close()  # the refusal stops the process: leave no session open behind it
            raise

    async def _join_replicated(self, etcd: EtcdClient) -> tuple[Chain, bool]:
        cfg = self.config
        await self.join()
        keys = Keys(cfg.etcd_prefix.encode())
        self._published = await published_genesis(etcd, keys)
        chain, bootstrap = self._open_chain()
        agreed = await agree_genesis(etcd, keys, chain.params)
        if agreed != chain.params and bootstrap:
            # another member published its devnet first: drop the one just made here and join that one
            chain.close()
            for name in STORE_FILES:
                (cfg.data_dir / name).unlink(missing_ok=True)
            self.devnet_authority = ""
            self._published = agreed
            chain, bootstrap = self._open_chain()
        if chain.params != agreed:
            ours, theirs = identity_of(chain.params).describe(), identity_of(agreed).describe()
            problem = f"holds a {ours}, but the network in etcd agreed on a {theirs}"
            chain.close()
            raise StoreRefused(str(cfg.data_dir), problem, REMEDY_FOREIGN)
        check_same(chain.params, agreed)
        return chain, bootstrap

    def _node_id(self) -> str:
        if self.config.node_id:
            return self.config.node_id
        path = self.config.data_dir / "node-id"
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(secrets.token_hex(8) + "\n")
        return path.read_text().strip()

    def _orderer(
        self, chain: Chain, mempool: Mempool, pipeline: Pipeline, hub: EventHub, snapshots: SnapshotManager
    ) -> Orderer:
        cfg = self.config
        if cfg.orderer == "solo" and not cfg.follow:
            return SoloOrderer(
                chain,
                mempool,
                pipeline,
                hub,
                block_interval=cfg.block_interval,
                empty_block_interval=cfg.empty_block_interval,
                storage=self.storage,
            )
        applier = BlockApplier(chain, mempool, pipeline, hub, storage=self.storage)
        forwarder = Forwarder(
            pipeline, mempool, max_batch=cfg.max_batch, proof=MemberProof(cfg.cluster_secret), tls=self.tls.members
        )
        if cfg.follow:
            return FollowOrderer(
                chain, applier, forwarder, cfg.follow, max_lag_blocks=cfg.max_lag_blocks, tls=self.tls.members
            )
        assert self._etcd is not None
        settings = ReplicationSettings(
            node_id=self._node_id(),
            lease_ttl=cfg.lease_ttl,
            poll_interval=min(0.05, cfg.block_interval),
            block_interval=cfg.block_interval,
            empty_block_interval=cfg.empty_block_interval,
            max_lag_blocks=cfg.max_lag_blocks,
            compact_interval=cfg.etcd_compact_interval,
        )
        keys = Keys(cfg.etcd_prefix.encode())
        return ReplicatedOrderer(
            chain,
            mempool,
            applier,
            forwarder,
            snapshots,
            self._etcd,
            keys,
            settings,
            part_bytes=cfg.etcd_part_bytes,
            on_leave=self._leave,
        )

    def _leave(self, why: str) -> None:
        self.leaving = why
        self.left.set()

    async def start(self) -> None:
        cfg = self.config
        self.ports.metrics = self.metrics_endpoint.start()  # first: a taken port fails before the store opens
        self.tls = NodeTLS.from_config(cfg)  # before anything binds or opens: a bad file stops the start here
        if (warning := plaintext_line(cfg)) is not None:
            log.warning("%s", warning)
        listeners = {
            "--grpc-addr": cfg.grpc_addr,
            "--web-addr": cfg.web_addr,
            "--admin-addr": cfg.admin_addr,
            "--internal-addr": cfg.internal_addr,
        }
        resources = Resources.detect(cfg.cpu_limit)
        verify_workers = verify_worker_count(cfg.verify_workers, resources)
        self._readers_count = read_worker_count(cfg.read_workers, resources, verify_workers)
        if self._readers_count:  # before the check: two nodes sharing a port by starting at once is refused too
            self._port_lock = PortLock.take("--grpc-addr", cfg.grpc_addr)
        for flag, addr in listeners.items():
            if addr:
                check_free(flag, addr)  # ListenError: main prints one line naming the flag
        if self.metrics is not None:
            self.metrics.observe(lambda: self.state)
            self.metrics.observe_storage(self.storage)
        chain, bootstrap = await self._open_replicated() if cfg.orderer == "etcd" else self._open_chain()
        if cfg.store_writer == "process":
            chain.start_writer()  # here, in the main thread: the child is killed when this thread ends
        if self.metrics is not None:
            self.metrics.height = chain.height
        mempool = Mempool(cfg.mempool_capacity)
        if cfg.verify_workers < 0:  # sized here from the CPUs and memory this process may use
            log.info("verify workers: %d (%s)", verify_workers, resources.describe())
        self._verifier = Verifier(verify_workers, cfg.max_message_bytes, stall_seconds=cfg.verify_stall_seconds)
        self._verifier.start_warm_up()  # in the background: SERVING does not wait for a worker to spawn
        pipeline = Pipeline(chain, mempool, self._verifier, telemetry=self.telemetry)
        hub = EventHub(cfg.subscriber_queue, cfg.max_streams)
        hold = os.environ.get(SNAPSHOT_HOLD_ENV)  # test hook (SnapshotManager): a copy that waits
        snapshots = SnapshotManager(
            chain, cfg.snapshots, chunk_bytes=cfg.snapshot_chunk_bytes, hold_file=Path(hold) if hold else None
        )
        snapshots.discard_leftovers()  # a copy a crash interrupted is no snapshot and nobody tracks it
        self._jobs = SnapshotJobs(snapshots)
        orderer = self._orderer(chain, mempool, pipeline, hub, snapshots)
        self.state = NodeState(
            chain, mempool, pipeline, hub, orderer, snapshots, cfg.max_batch, storage=self.storage,
            members=MemberProof(cfg.cluster_secret),
        )  # fmt: skip
        if bootstrap:
            outcome = (await pipeline.submit([bootstrap_message(cfg.data_dir)]))[0]
            if not outcome.accepted:
                raise InvariantBroken(f"devnet bootstrap failed: {outcome.reason} {outcome.detail}")

        chain_servicer = ChainServicer(self.state)
        await self._start_grpc(chain_servicer)
        if cfg.internal_addr:
            await self._start_internal(snapshots)

        if cfg.admin_addr:
            await self._start_admin(snapshots)

        if cfg.web_addr:
            await self._start_web(chain_servicer)

        if isinstance(orderer, ReplicatedOrderer):  # members forward and state-sync to the internal listener
            orderer.addr = cfg.advertise_addr or f"{_reachable_host(cfg.internal_addr)}:{self.ports.internal}"
        await orderer.start()
        self.state.ready = True
        await self._health.set(LIVENESS, health_pb2.HealthCheckResponse.SERVING)  # answered on the event loop
        await self._set_health(self.state.serving)
        self._health_task = asyncio.create_task(self._watch_health(), name="health")

    async def _start_admin(self, snapshots: SnapshotManager) -> None:
        """AdminService on --admin-addr: under TLS only for clients with a certificate of the cluster's CA."""
        assert self._jobs is not None
        cfg = self.config
        admin_interceptors: list[Interceptor] = [ErrorInterceptor()]
        if cfg.admin_token:
            admin_interceptors.insert(0, TokenInterceptor(cfg.admin_token))
        self._admin = grpc.aio.server(interceptors=admin_interceptors, options=[GRPC_EXCLUSIVE])
        admin_service_pb2_grpc.add_AdminServiceServicer_to_server(AdminServicer(snapshots, self._jobs), self._admin)
        credentials = self.tls.mutual_credentials()
        self.ports.admin = grpc_add_port(self._admin, "--admin-addr", cfg.admin_addr, credentials)
        await self._admin.start()

    def _interceptors(self) -> list[Interceptor]:
        interceptors: list[Interceptor] = [ErrorInterceptor()]
        if self.metrics is not None:  # outside the error mapping: it reads the final status and reason code
            interceptors.insert(0, RpcMetricsInterceptor(self.metrics))
        return interceptors

    def _grpc_options(self) -> list[tuple[str, object]]:
        cfg = self.config
        return [
            ("grpc.max_receive_message_length", cfg.max_message_bytes * (cfg.max_batch + 1)),
            ("grpc.max_send_message_length", 64 * 1024 * 1024),
            GRPC_EXCLUSIVE,
        ]

    async def _start_internal(self, snapshots: SnapshotManager) -> None:
        """The listener for the cluster's members and gateways: forwarded batches (the member proof honoured
        from a peer with a certificate of the cluster's CA), read batches, state sync, a --follow upstream."""
        assert self.state is not None
        cfg = self.config
        interceptors = self._interceptors()
        server = grpc.aio.server(interceptors=interceptors, options=self._grpc_options())
        internal_chain = ChainServicer(self.state, internal=True)
        keychain = KeychainServicer(self.state)
        service_pb2_grpc.add_ChainServiceServicer_to_server(internal_chain, server)
        keychain_service_pb2_grpc.add_KeychainServiceServicer_to_server(keychain, server)
        reads = MethodHandlers.collect(  # ReadBatch (node/server/rpc/read_batch.py), for the gateways
            ((service_pb2_grpc.add_ChainServiceServicer_to_server, internal_chain),
             (keychain_service_pb2_grpc.add_KeychainServiceServicer_to_server, keychain))
        )  # fmt: skip
        batched = await intercepted({p: reads.registered[p] for p in local_paths()}, interceptors[::-1])
        self._batches = add_read_batch(server, batched)
        health_pb2_grpc.add_HealthServicer_to_server(self._health, server)
        sync = SnapshotSyncServicer(snapshots, rate=cfg.state_sync_rate)  # members state-sync from each other
        snapshot_sync_service_pb2_grpc.add_SnapshotSyncServiceServicer_to_server(sync, server)
        add_reflection_to_server(reflection_servicer(INTERNAL_REFLECTED), server)
        self._internal = server
        self.ports.internal = grpc_add_port(server, "--internal-addr", cfg.internal_addr, self.tls.mutual_credentials())
        await server.start()

    async def _start_grpc(self, chain_servicer: ChainServicer) -> None:
        """The public gRPC server. With read workers (node/server/readers) it listens only on a private
        address the workers relay to; the workers listen on --grpc-addr, which this process holds with
        bound, never-listening SO_REUSEPORT sockets (docs/node.md, "Read workers")."""
        assert self.state is not None
        cfg = self.config
        self._server = grpc.aio.server(interceptors=self._interceptors(), options=self._grpc_options())
        service_pb2_grpc.add_ChainServiceServicer_to_server(chain_servicer, self._server)
        keychain_service_pb2_grpc.add_KeychainServiceServicer_to_server(KeychainServicer(self.state), self._server)
        health_pb2_grpc.add_HealthServicer_to_server(self._health, self._server)
        add_reflection_to_server(reflection_servicer(REFLECTED), self._server)
        private = private_target()
        if self._readers_count:  # the workers listen on the public address; this process holds it
            self._anchor = PortAnchor.bind("--grpc-addr", cfg.grpc_addr)
            self.ports.grpc = self._anchor.port
            grpc_add_port(self._server, "--read-workers", private)  # a private socket: plaintext
        else:
            self.ports.grpc = grpc_add_port(self._server, "--grpc-addr", cfg.grpc_addr, self.tls.public_credentials())
        await self._server.start()
        if self._readers_count:
            host = cfg.grpc_addr.rpartition(":")[0]
            receive = cfg.max_message_bytes * (cfg.max_batch + 1)

            def settings(index: int) -> WorkerSettings:
                addr = f"{host}:{self.ports.grpc}"
                return WorkerSettings(
                    index,
                    str(cfg.data_dir),
                    addr,
                    private,
                    receive,
                    self.metrics is not None,
                    cfg.log_level,
                    cfg.log_format,
                    cfg.read_answer_bytes,
                    str(cfg.tls_cert or ""),
                    str(cfg.tls_key or ""),
                )

            stale = self.state.chain.store.clear_stale_readers  # a killed worker's read transaction
            durations = self.metrics.rpc_duration if self.metrics is not None else None
            self.readers = ReadWorkers(self._readers_count, settings, durations, on_exit=stale)
            if self.metrics is not None:
                self.metrics.observe_read_workers(self.readers)
            try:
                await self.readers.start()
            except ListenError:
                await self._server.stop(None)
                if self._anchor is not None:
                    self._anchor.close()
                raise

    async def close_etcd(self) -> None:
        if self._etcd is not None:
            await self._etcd.close()

    async def _set_health(self, serving: bool) -> None:
        status = health_pb2.HealthCheckResponse.SERVING if serving else health_pb2.HealthCheckResponse.NOT_SERVING
        for service in READINESS_NAMES:
            await self._health.set(service, status)

    async def _watch_health(self) -> None:
        """Readiness NOT_SERVING while the orderer says so (catching up, halted) or block commits fail."""
        assert self.state is not None
        serving = self.state.serving
        while self.state.ready:
            await asyncio.sleep(0.2)
            now = self.state.serving
            if now != serving and self.state.ready:
                serving = now
                await self._set_health(serving)

    async def _start_web(self, chain_servicer: ChainServicer) -> None:
        assert self.state is not None
        app = grpc_web_app(
            [
                (service_pb2_grpc.add_ChainServiceServicer_to_server, chain_servicer),
                (keychain_service_pb2_grpc.add_KeychainServiceServicer_to_server, KeychainServicer(self.state)),
                (health_pb2_grpc.add_HealthServicer_to_server, self._health),
                (add_reflection_to_server, reflection_servicer(REFLECTED)),
            ],
            cors_origins=self.config.cors_origins,
            error_mapper=to_status,
        )
        if self.metrics is not None:
            app.middlewares.append(grpc_web_metrics(self.metrics))
        host, _, port = self.config.web_addr.rpartition(":")
        self._web_runner, self.ports.web = await serve_grpc_web(
            app, host or "localhost", int(port), ssl_context=self.tls.web_context()
        )

    def ready_line(self) -> str:
        assert self.state is not None
        return json.dumps(
            {
                "event": "ready",
                "grpc_port": self.ports.grpc,
                "web_port": self.ports.web,
                "admin_port": self.ports.admin,
                "internal_port": self.ports.internal,
                "tls": self.tls.enabled,
                "metrics_port": self.ports.metrics,
                "height": self.state.chain.height,
                "network": self.config.network,
                "devnet_authority": self.devnet_authority,
            }
        )

    async def stop(self) -> None:
        """Drain: NOT_SERVING first, then stop producing, then close the listeners."""
        if self.state is not None:
            self.state.ready = False
        if self._health_task is not None:
            await self._health_task
        await self._set_health(False)  # readiness only: liveness stays SERVING while the node drains
        await asyncio.sleep(self.config.drain_seconds)
        if self.state is not None:
            await self.state.orderer.stop()
            self.state.hub.close()
        if self._web_runner is not None:
            await self._web_runner.cleanup()  # type: ignore[attr-defined]
        if self.readers is not None:  # before the main server: their relayed calls end on it
            await self.readers.stop()
        if self._batches is not None:  # the gateways' read streams end; what they had waiting comes as calls
            self._batches.close()
        for server in (self._server, self._internal, self._admin):
            if server is not None:
                await server.stop(grace=1.0)
        if self._anchor is not None:
            self._anchor.close()
        if self._port_lock is not None:
            self._port_lock.release()
        self.metrics_endpoint.stop()  # before the store closes: scrapes read the node's objects
        if self._jobs is not None:
            await asyncio.to_thread(self._jobs.close)  # a snapshot copy in progress reads the store
        if self.state is not None:
            self.state.pipeline.close()
            self.state.chain.close()
        if self._verifier is not None:
            self._verifier.close()
