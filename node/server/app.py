"""The node: wires the chain, mempool, pipeline, orderer, event hub and the servers.

    node = NodeApp(config); await node.start(); ...; await node.stop()

The chain comes from node/server/bootstrap.py (open, verify, restore, join, genesis); the listeners from
node/server/listeners.py. Each part is started onto one exit stack with its stop beside it, so `stop` is the
mirror of `start` (and a start that fails half way closes what it had started): readiness NOT_SERVING and
--drain-seconds first, then the orderer (a member: and a handover while the others see the next leader) and
the event hub, the listeners (gRPC-web, the admin listener, the
internal listener after its read-batch streams end, the read workers before the main server they relay
to, the port they share), the metrics endpoint, snapshot jobs, the pipeline, the verifier, the chain.

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
import socket
from contextlib import AsyncExitStack
from pathlib import Path

from grpc_health.v1 import health, health_pb2
from opentelemetry.trace import TracerProvider

from node.errors import InvariantBroken
from node.listen import check_free
from node.observability.metrics import MetricsEndpoint
from node.server.bootstrap import Bootstrap, Opened, node_id
from node.server.config import NodeConfig
from node.server.devnet import bootstrap_message
from node.server.events import EventHub
from node.server.listeners import CHAIN_SERVICE, Listeners, Ports
from node.server.ordering.applier import BlockApplier, VerifyBlocks
from node.server.ordering.etcd.log import Keys
from node.server.ordering.etcd.replicated import ReplicatedOrderer, ReplicationSettings
from node.server.ordering.follower import FollowOrderer
from node.server.ordering.orderer import Orderer, SoloOrderer
from node.server.readers.sharing import PortLock
from node.server.readers.supervisor import ReadWorkers, read_worker_count
from node.server.rpc.servicer import ChainServicer, NodeState
from node.server.snapshots import SnapshotManager
from node.server.snapshots.jobs import SnapshotJobs
from node.server.storage_health import StorageHealth
from node.server.telemetry.node_metrics import NodeMetrics
from node.server.telemetry.spans import NodeTelemetry
from node.server.transport import NodeTLS, plaintext_line
from node.server.write.forwarding import Forwarder
from node.server.write.membership import MemberProof
from node.server.write.mempool import Mempool
from node.server.write.pipeline import Pipeline
from node.server.write.sizing import Resources, verify_worker_count
from node.server.write.verify import Verifier

log = logging.getLogger("chain.node")
LIVENESS = "liveness"
# Test hook: while the file this names exists, snapshot copies wait before they are published (tests stand a
# slow copy with it). Unset in production.
SNAPSHOT_HOLD_ENV = "CHAIN_TEST_SNAPSHOT_HOLD"
READINESS = "readiness"
HANDOVER_SECONDS = 1.0  # a stopping member's listeners outlive its leadership by this much (_stop_orderer)
READINESS_NAMES = ("", CHAIN_SERVICE, READINESS)  # "" and ChainService kept as they were documented


def _reachable_host(listen_addr: str) -> str:
    """The host other members reach this node at: the listen host, or this host's address for a wildcard."""
    host = listen_addr.rpartition(":")[0].strip("[]")
    if host in ("", "0.0.0.0", "::"):
        return socket.gethostbyname(socket.gethostname())  # in Kubernetes: the pod's IP (/etc/hosts)
    return host


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
        self.tls = NodeTLS()  # read from the flags' files in start(): a bad file is one line, exit 2
        # the public asyncio servicer (grpc_health.v1.health.aio); the grpc-stubs typing predates it
        self._health = health.aio.HealthServicer()  # type: ignore[attr-defined]
        self.storage = StorageHealth()  # failing block commits: STORAGE_FAILED refusals, NOT_SERVING
        self._health_task: asyncio.Task[None] | None = None
        self.devnet_authority: str = ""
        self.readers: ReadWorkers | None = None
        self.leaving = ""  # why this node must restart (the serve loop drains and exits); "" while it need not
        self.left = asyncio.Event()
        self._jobs: SnapshotJobs | None = None
        self._stack: AsyncExitStack | None = None  # what `stop` closes: every part `start` started

    async def start(self) -> None:
        async with AsyncExitStack() as stack:  # a start that fails closes what it had started
            await self._start(stack)
            self._stack = stack.pop_all()

    async def stop(self) -> None:
        """Drain: NOT_SERVING first, then stop producing, then close the listeners: `start` in reverse."""
        stack, self._stack = self._stack, None
        if stack is not None:
            await stack.aclose()

    async def _start(self, stack: AsyncExitStack) -> None:
        cfg = self.config
        resources = Resources.detect(cfg.cpu_limit)
        verify_workers = verify_worker_count(cfg.verify_workers, resources)
        readers = read_worker_count(cfg.read_workers, resources, verify_workers)
        self._claim_ports(stack, readers)
        opened = await Bootstrap(cfg).open()
        if opened.etcd is not None:
            stack.push_async_callback(opened.etcd.close)  # the orderer closes it first; this is for a failed start
        stack.callback(opened.chain.close)
        self.devnet_authority = opened.devnet_authority
        if cfg.verify_workers < 0:  # sized here from the CPUs and memory this process may use
            log.info("verify workers: %d (%s)", verify_workers, resources.describe())
        if cfg.read_workers < 0:
            log.info("read workers: %d (%s)", readers, resources.describe())
        state = await self._parts(stack, opened, verify_workers)
        listeners = Listeners(cfg, self.tls, self._health, self.metrics, self.ports)
        chain_servicer = ChainServicer(state)
        self.readers = await listeners.public(stack, state, chain_servicer, readers)
        if cfg.internal_addr:
            await listeners.internal(stack, state, state.snapshots)
        if cfg.admin_addr:
            assert self._jobs is not None
            await listeners.admin(stack, state.snapshots, self._jobs)
        if cfg.web_addr:
            await listeners.web(stack, state, chain_servicer)
        await self._go_live(stack, state)

    def _claim_ports(self, stack: AsyncExitStack, readers: int) -> None:
        """Before the store opens: the metrics port, the TLS files, the listeners' addresses free (and, with
        `readers` read workers, the public port's lock)."""
        cfg = self.config
        self.ports.metrics = self.metrics_endpoint.start()  # first: a taken port fails before the store opens
        stack.callback(self.metrics_endpoint.stop)
        self.tls = NodeTLS.from_config(cfg)  # before anything binds or opens: a bad file stops the start here
        if (warning := plaintext_line(cfg)) is not None:
            log.warning("%s", warning)
        listeners = {
            "--grpc-addr": cfg.grpc_addr,
            "--web-addr": cfg.web_addr,
            "--admin-addr": cfg.admin_addr,
            "--internal-addr": cfg.internal_addr,
        }
        if readers:  # before the check: two nodes sharing a port by starting at once is refused too
            stack.callback(PortLock.take("--grpc-addr", cfg.grpc_addr).release)
        for flag, addr in listeners.items():
            if addr:
                check_free(flag, addr)  # ListenError: main prints one line naming the flag
        if self.metrics is not None:
            self.metrics.observe(lambda: self.state)
            self.metrics.observe_storage(self.storage)

    async def _parts(self, stack: AsyncExitStack, opened: Opened, verify_workers: int) -> NodeState:
        """The writer, verifier, pipeline, event hub, snapshots and the orderer over the opened chain."""
        cfg, chain = self.config, opened.chain
        if cfg.store_writer == "process":
            chain.start_writer()  # here, in the main thread: the child is killed when this thread ends
        if self.metrics is not None:
            self.metrics.height = chain.height
        mempool = Mempool(cfg.mempool_capacity)
        verifier = Verifier(verify_workers, cfg.max_message_bytes, stall_seconds=cfg.verify_stall_seconds)
        stack.callback(verifier.close)
        verifier.start_warm_up()  # in the background: SERVING does not wait for a worker to spawn
        pipeline = Pipeline(chain, mempool, verifier, telemetry=self.telemetry)
        stack.callback(pipeline.close)
        hub = EventHub(cfg.subscriber_queue, cfg.max_streams)
        hold = os.environ.get(SNAPSHOT_HOLD_ENV)  # test hook (SnapshotManager): a copy that waits
        snapshots = SnapshotManager(
            chain, cfg.snapshots, chunk_bytes=cfg.snapshot_chunk_bytes, hold_file=Path(hold) if hold else None
        )
        snapshots.discard_leftovers()  # a copy a crash interrupted is no snapshot and nobody tracks it
        jobs = self._jobs = SnapshotJobs(snapshots)
        stack.push_async_callback(asyncio.to_thread, jobs.close)  # a copy in progress reads the store
        stack.callback(self.metrics_endpoint.stop)  # before what scrapes read closes (stopping twice is nothing)
        orderer = self._orderer(opened, mempool, pipeline, hub, snapshots)
        self.state = NodeState(
            chain, mempool, pipeline, hub, orderer, snapshots, cfg.max_batch, storage=self.storage,
            members=MemberProof(cfg.cluster_secret),
        )  # fmt: skip
        if opened.bootstrap:
            outcome = (await pipeline.submit([bootstrap_message(cfg.data_dir)]))[0]
            if not outcome.accepted:
                raise InvariantBroken(f"devnet bootstrap failed: {outcome.reason} {outcome.detail}")
        return self.state

    async def _go_live(self, stack: AsyncExitStack, state: NodeState) -> None:
        """The orderer starts producing, then readiness: the first two things a stop undoes."""
        cfg, orderer = self.config, state.orderer
        stack.callback(state.hub.close)  # after the orderer stopped: no block is published into a closed hub
        if isinstance(orderer, ReplicatedOrderer):  # members forward and state-sync to the internal listener
            orderer.addr = cfg.advertise_addr or f"{_reachable_host(cfg.internal_addr)}:{self.ports.internal}"
        await orderer.start()
        stack.push_async_callback(self._stop_orderer, orderer)
        state.ready = True
        await self._health.set(LIVENESS, health_pb2.HealthCheckResponse.SERVING)  # answered on the event loop
        await self._set_health(state.serving)
        self._health_task = asyncio.create_task(self._watch_health(), name="health")
        stack.push_async_callback(self._drain, state)

    async def _stop_orderer(self, orderer: Orderer) -> None:
        """Stop ordering; a member then keeps its listeners up for a handover (at most HANDOVER_SECONDS, never
        longer than --drain-seconds) while the others see the next leader: a write forwarded to it meanwhile is
        refused DRAINING (not admitted: the client retries) instead of cut by the closing listener, which
        would leave its client OUTCOME_UNKNOWN."""
        await orderer.stop()
        if isinstance(orderer, ReplicatedOrderer):
            await asyncio.sleep(min(HANDOVER_SECONDS, self.config.drain_seconds))

    async def _drain(self, state: NodeState) -> None:
        """NOT_SERVING first (readiness only: liveness stays SERVING while the node drains), then
        --drain-seconds for the load balancers to see it before anything stops."""
        state.ready = False
        if self._health_task is not None:
            await self._health_task
        await self._set_health(False)
        await asyncio.sleep(self.config.drain_seconds)

    def _orderer(
        self, opened: Opened, mempool: Mempool, pipeline: Pipeline, hub: EventHub, snapshots: SnapshotManager
    ) -> Orderer:
        cfg, chain = self.config, opened.chain
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
        mode: VerifyBlocks = "root" if cfg.blocks_verified == "root" else "full"
        applier = BlockApplier(chain, mempool, pipeline, hub, storage=self.storage, verify_blocks=mode)
        members, proof = self.tls.members, MemberProof(cfg.cluster_secret)
        forwarder = Forwarder(pipeline, mempool, max_batch=cfg.max_batch, proof=proof, tls=members)
        if cfg.follow:
            return FollowOrderer(chain, applier, forwarder, cfg.follow, max_lag_blocks=cfg.max_lag_blocks, tls=members)
        assert opened.etcd is not None
        settings = ReplicationSettings(
            node_id=node_id(cfg),
            lease_ttl=cfg.lease_ttl,
            poll_interval=min(0.05, cfg.block_interval),
            block_interval=cfg.block_interval,
            empty_block_interval=cfg.empty_block_interval,
            max_lag_blocks=cfg.max_lag_blocks,
            compact_interval=cfg.etcd_compact_interval,
        )
        keys = Keys(cfg.etcd_prefix.encode())
        return ReplicatedOrderer(
            chain, mempool, applier, forwarder, snapshots, opened.etcd, keys, settings,
            part_bytes=cfg.etcd_part_bytes, on_leave=self._leave,
        )  # fmt: skip

    def _leave(self, why: str) -> None:
        self.leaving = why
        self.left.set()

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
