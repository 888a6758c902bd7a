"""chain-node configuration: command-line flags, each also read from an environment variable.

The variable for `--grpc-addr` is `CHAIN_NODE_GRPC_ADDR`, and so on (upper case, dashes to
underscores); a flag given on the command line wins. Repeatable flags (`--cors-origin`) take a
comma-separated list from the environment.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from node import constants as C
from node.envflags import add_version, describe_env, env_defaults
from node.errors import ConfigError, config_exit
from node.observability.address import split_addr
from node.storage.retention import StateHistory

DEFAULT_STATE_HISTORY = StateHistory()

ENV_PREFIX = "CHAIN_NODE_"
LIST_FLAGS = frozenset({"cors_origins"})


@dataclass(frozen=True)
class NodeConfig:
    grpc_addr: str = "localhost:50051"
    web_addr: str = "localhost:50052"
    admin_addr: str = "localhost:50053"
    # what members of one deployment say to each other (forwarded batches with the member proof, state sync,
    # read batches, a --follow replica's upstream): mutual TLS when --tls-cert is given; '' disables
    internal_addr: str = "localhost:50054"
    admin_token: str = ""
    data_dir: Path = Path("data/node")
    network: str = "devnet"
    genesis: Path | None = None
    restore: Path | None = None
    reinitialize: bool = False
    snapshot_dir: Path | None = None
    # a restore (--restore, or state sync in the replicated mode) has its own budget, apart from catching up
    restore_timeout: float = 3600.0
    snapshot_chunk_bytes: int = 1024 * 1024  # chunk size of the manifests of new snapshots (state sync)
    # bytes/s this node sends to every member state-syncing from it together (0: no limit); 32 MiB/s is a
    # quarter of a 1 Gbit/s link and moves a 100 GiB store in 53 min (docs/operations.md, "State sync")
    state_sync_rate: int = 32 * 1024 * 1024
    block_interval: float = 0.2
    empty_block_interval: float = 5.0
    cors_origins: tuple[str, ...] = ()
    max_message_bytes: int = C.MAX_MESSAGE_BYTES
    max_batch: int = C.MAX_BATCH_SUBMIT
    mempool_capacity: int = C.MEMPOOL_CAPACITY
    tree_cache_nodes: int = C.TREE_CACHE_NODES  # the latest blocks' tree nodes kept in memory for updates
    # the state trees the store keeps: the last N blocks' ("all": every one, an archive node); older stale tree
    # nodes are collected after each commit (node/storage/retention.py)
    state_history: StateHistory = DEFAULT_STATE_HISTORY
    verify_workers: int = -1
    # a verify worker that answers nothing this long while batches wait is hung: killed, batches verified inline
    verify_stall_seconds: float = 10.0
    cpu_limit: float = 0.0  # CPUs this node may use (chart: the pod's limits.cpu); 0: cgroup quota and affinity
    # processes serving reads beside the main one on the same gRPC port (docs/node.md, "Read workers");
    # -1: sized from the CPUs and memory the node may use (one per whole CPU, none on one CPU, at most 4;
    # readers/supervisor.py auto_read_workers); 0: the main process serves everything, its port bound exclusively
    read_workers: int = -1
    # bytes of answers each read worker keeps per snapshot of the store (node/server/readers/answers.py); 0: none
    read_answer_bytes: int = C.READ_ANSWER_BYTES
    # "process": block commits run in a child process that owns the store's write transactions
    # (node/storage/writer.py); "thread": in a thread of the main process
    store_writer: str = "process"
    # Items a subscriber may fall behind by before it is dropped: more than two full blocks.
    subscriber_queue: int = 20_000
    drain_seconds: float = 1.0
    log_level: str = "info"
    log_format: str = "text"  # or "json" (docs/observability.md)
    metrics_addr: str = "localhost:9464"  # Prometheus endpoint; '' disables
    # ordering: "solo" (this node alone) or "etcd" (replicated, docs/replication.md)
    orderer: str = "solo"
    etcd_endpoints: tuple[str, ...] = ()
    etcd_prefix: str = "/chain-node/"
    etcd_part_bytes: int = 1024 * 1024
    etcd_compact_interval: float = 30.0
    lease_ttl: int = 3
    node_id: str = ""
    advertise_addr: str = ""
    # read-replica mode: follow this node's blocks and forward writes to it
    follow: str = ""
    # how blocks ordered elsewhere are applied (docs/replication.md, "What a member trusts"): "root" takes the
    # leader's write set and checks the state root, "full" executes every block again; "": root for an etcd
    # member, full otherwise (a --follow replica takes blocks from outside its cluster: always full)
    verify_blocks: str = ""
    # health is NOT_SERVING while more than this many blocks behind the log (or the followed node)
    max_lag_blocks: int = 10
    # shared by the members of a cluster: forwarded batches carry proof, and are not verified again
    # (node/server/write/membership.py); from --cluster-secret-file or --cluster-secret, never logged
    cluster_secret: bytes = field(default=b"", repr=False)
    # TLS (node/tls.py, docs/security.md): the node's certificate and key serve every listener; the cluster's
    # CA checks client certificates on the internal and admin listeners and the members this node dials
    tls_cert: Path | None = None
    tls_key: Path | None = None
    tls_client_ca: Path | None = None
    # etcd client TLS: the CA etcd's certificate chains to, and the client certificate it requires
    etcd_ca_file: Path | None = None
    etcd_cert: Path | None = None
    etcd_key: Path | None = None
    # server streams (subscriptions) open at once on this node; more are refused RESOURCE_EXHAUSTED
    max_streams: int = C.MAX_STREAMS

    @property
    def blocks_verified(self) -> str:
        """How this node applies blocks ordered elsewhere: `verify_blocks`, or its role's default."""
        return self.verify_blocks or ("root" if self.orderer == "etcd" else "full")

    @property
    def tls(self) -> bool:
        return self.tls_cert is not None

    @property
    def snapshots(self) -> Path:
        return self.snapshot_dir or self.data_dir / "snapshots"


# --help's text for defaults derived when the node starts
SHOWN_DEFAULTS = MappingProxyType({"snapshot_dir": "DATA_DIR/snapshots", "node_id": "kept in DATA_DIR/node-id"})


def _worker_flags(p: argparse.ArgumentParser, d: NodeConfig) -> None:
    """The processes beside the main one: signature verification, reads; the CPUs that size them."""
    p.add_argument("--verify-workers", type=int, default=d.verify_workers, help="-1: one per extra core; 0: inline")
    p.add_argument(
        "--verify-stall-seconds",
        type=float,
        default=d.verify_stall_seconds,
        help="a verify worker silent this long while batches wait is killed and replaced",
    )
    p.add_argument(
        "--read-workers",
        type=int,
        default=d.read_workers,
        help="processes answering reads on the gRPC port beside the main one; -1: one per CPU (none on one CPU), "
        "at most 4, within the memory limit; 0: none",
    )
    p.add_argument(
        "--read-answer-bytes",
        type=int,
        default=d.read_answer_bytes,
        help="bytes of answers each read worker keeps for calls repeated before the next write; 0 keeps none",
    )
    p.add_argument(
        "--store-writer",
        choices=("process", "thread"),
        default=d.store_writer,
        help="where block commits run: a child process owning the store's writes, or a thread of this one",
    )
    p.add_argument("--cpu-limit", type=float, default=d.cpu_limit, help="CPUs this node may use (sizes -1 workers)")


def _cluster_flags(p: argparse.ArgumentParser, d: NodeConfig) -> None:
    """Ordering and membership: etcd, the leader lease, read replicas, the secret members share."""
    p.add_argument("--orderer", default=d.orderer, choices=["solo", "etcd"], help="block ordering")
    p.add_argument("--etcd-endpoints", default="", help="etcd client URLs, comma-separated (--orderer etcd)")
    p.add_argument("--etcd-prefix", default=d.etcd_prefix, help="key prefix of this network in etcd")
    p.add_argument("--etcd-part-bytes", type=int, default=d.etcd_part_bytes, help="blocks above this are split")
    p.add_argument(
        "--etcd-compact-interval", type=float, default=d.etcd_compact_interval, help="seconds between etcd compactions"
    )
    p.add_argument("--lease-ttl", type=int, default=d.lease_ttl, help="leader lease TTL in seconds (etcd)")
    p.add_argument("--node-id", default=d.node_id, help="member id")
    p.add_argument(
        "--advertise-addr",
        default=d.advertise_addr,
        help="address of this member's internal listener that other members forward and state-sync to",
    )
    p.add_argument("--follow", default=d.follow, help="read replica of the node whose internal listener is here")
    p.add_argument(
        "--verify-blocks",
        default="",
        choices=["full", "root"],
        help="blocks from the log: root applies the leader's write set and checks the state root, full executes "
        "them again (default: root for an etcd member; a --follow replica is always full)",
    )
    p.add_argument("--max-lag-blocks", type=int, default=d.max_lag_blocks, help="NOT_SERVING beyond this lag")
    p.add_argument(
        "--cluster-secret",
        default="",
        help="secret the cluster's members share (prefer CHAIN_NODE_CLUSTER_SECRET or the file: argv is visible)",
    )
    p.add_argument(
        "--cluster-secret-file", type=Path, default=None, help="file holding the cluster secret (--cluster-secret)"
    )


def _tls_flags(p: argparse.ArgumentParser, d: NodeConfig) -> None:
    """The internal listener, TLS of the node's listeners and of the connections it makes, the stream cap
    (docs/security.md)."""
    p.add_argument(
        "--internal-addr",
        default=d.internal_addr,
        help="listener for the cluster's members and gateways (mutual TLS with --tls-client-ca); '' disables",
    )
    p.add_argument("--max-streams", type=int, default=d.max_streams, help="server streams open at once, at most")
    p.add_argument("--tls-cert", type=Path, default=None, help="PEM certificate chain of every listener (enables TLS)")
    p.add_argument("--tls-key", type=Path, default=None, help="PEM private key of --tls-cert")
    p.add_argument(
        "--tls-client-ca",
        type=Path,
        default=None,
        help="the cluster's CA: client certificates on the internal and admin listeners, and members dialled",
    )
    p.add_argument("--etcd-ca-file", type=Path, default=None, help="CA of etcd's certificate (https:// endpoints)")
    p.add_argument("--etcd-cert", type=Path, default=None, help="client certificate presented to etcd")
    p.add_argument("--etcd-key", type=Path, default=None, help="private key of --etcd-cert")


def _parser() -> argparse.ArgumentParser:
    d = NodeConfig()
    p = argparse.ArgumentParser(prog="chain-node", description="Version-control chain node (ChainService over gRPC).")
    p.add_argument("--grpc-addr", default=d.grpc_addr, help="native gRPC listen address")
    p.add_argument("--web-addr", default=d.web_addr, help="gRPC-web (HTTP/1.1) listen address; '' disables")
    p.add_argument("--admin-addr", default=d.admin_addr, help="AdminService listen address (keep it on localhost)")
    p.add_argument("--admin-token", default=d.admin_token, help="bearer token required by AdminService if set")
    p.add_argument("--data-dir", type=Path, default=d.data_dir, help="LMDB store directory")
    p.add_argument("--network", default=d.network, choices=["mainnet", "testnet", "devnet"], help="network name")
    p.add_argument("--genesis", type=Path, default=None, help="genesis file (JSON); devnet genesis when absent")
    p.add_argument("--restore", type=Path, default=None, help="start from this snapshot directory")
    p.add_argument(
        "--reinitialize",
        action="store_true",
        default=d.reinitialize,
        help="if the store is refused (damaged, foreign, missing), move it aside and start a new one",
    )
    p.add_argument("--snapshot-dir", type=Path, default=None, help="where snapshots go")
    p.add_argument(
        "--restore-timeout", type=float, default=d.restore_timeout, help="seconds a restore/state sync may take"
    )
    p.add_argument("--snapshot-chunk-bytes", type=int, default=d.snapshot_chunk_bytes, help="state-sync chunk size")
    p.add_argument(
        "--state-sync-rate",
        type=int,
        default=d.state_sync_rate,
        help="bytes/s this node serves state sync at, all streams together; 0: no limit",
    )
    p.add_argument("--block-interval", type=float, default=d.block_interval, help="seconds between blocks")
    p.add_argument(
        "--empty-block-interval", type=float, default=d.empty_block_interval, help="seconds between empty blocks"
    )
    p.add_argument(
        "--cors-origin",
        action="append",
        dest="cors_origins",
        default=None,
        metavar="ORIGIN",
        help="allowed browser origin",
    )
    p.add_argument("--max-message-bytes", type=int, default=d.max_message_bytes, help="largest message accepted")
    p.add_argument("--max-batch", type=int, default=d.max_batch, help="most messages per BatchSubmitMessages")
    p.add_argument("--mempool-capacity", type=int, default=d.mempool_capacity, help="pending messages at most")
    p.add_argument("--tree-cache-nodes", type=int, default=d.tree_cache_nodes, help="tree nodes kept for updates")
    p.add_argument(
        "--state-history",
        type=_state_history,
        default=d.state_history,
        metavar="N|all",
        help="keep the state trees of the last N blocks ('all': every one, an archive node)",
    )
    _worker_flags(p, d)
    p.add_argument(
        "--subscriber-queue",
        type=int,
        default=d.subscriber_queue,
        help="items a subscriber may lag before it is dropped",
    )
    p.add_argument(
        "--drain-seconds", type=float, default=d.drain_seconds, help="seconds streams get to end on shutdown"
    )
    p.add_argument("--log-level", default=d.log_level, help="debug, info, warning or error")
    p.add_argument("--log-format", default=d.log_format, choices=["text", "json"], help="json: one object per line")
    p.add_argument("--metrics-addr", default=d.metrics_addr, help="Prometheus metrics listen address; '' disables")
    _cluster_flags(p, d)
    _tls_flags(p, d)
    describe_env(p, ENV_PREFIX, lists=LIST_FLAGS, shown=SHOWN_DEFAULTS)
    add_version(p)
    return p


def _state_history(text: str) -> StateHistory:
    try:
        return StateHistory.parse(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"{err} (a number of blocks, or 'all')") from None


def parse_config(argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None) -> NodeConfig:
    env = os.environ if env is None else env
    parser = _parser()
    env_defaults(parser, ENV_PREFIX, env, lists=LIST_FLAGS)
    ns = parser.parse_args(argv)
    values = vars(ns)
    values["cors_origins"] = tuple(values["cors_origins"] or ())
    values["etcd_endpoints"] = tuple(e.strip() for e in values["etcd_endpoints"].split(",") if e.strip())
    try:
        values["cluster_secret"] = _cluster_secret(values["cluster_secret"], values.pop("cluster_secret_file"))
        _check(values)
    except ConfigError as err:
        config_exit(parser.prog, err)
    return NodeConfig(**values)


def _cluster_secret(value: str, path: Path | None) -> bytes:
    """The cluster secret, given itself or in a file (surrounding whitespace dropped); b"" for none."""
    if value and path is not None:
        raise ConfigError("give the cluster secret once: --cluster-secret or --cluster-secret-file, not both")
    where = "--cluster-secret"
    secret = value.strip().encode()
    if path is not None:
        where = "--cluster-secret-file"
        try:
            secret = path.read_bytes().strip()
        except OSError as err:
            raise ConfigError(f"--cluster-secret-file: cannot read {path}: {err.strerror}") from None
    if secret and len(secret) < C.MIN_CLUSTER_SECRET_BYTES:
        raise ConfigError(f"{where}: the cluster secret must be at least {C.MIN_CLUSTER_SECRET_BYTES} bytes")
    return secret


def _check(values: Mapping[str, Any]) -> None:
    """Flag combinations argparse cannot express: a `ConfigError` (one line, exit 2) for the first wrong one."""
    if values["orderer"] not in ("solo", "etcd"):
        raise ConfigError(f"--orderer must be solo or etcd, not {values['orderer']!r}")
    if values["orderer"] == "etcd" and not values["etcd_endpoints"]:
        raise ConfigError("--orderer etcd needs --etcd-endpoints (or CHAIN_NODE_ETCD_ENDPOINTS)")
    if values["metrics_addr"]:
        try:
            split_addr(values["metrics_addr"])
        except ValueError as err:
            raise ConfigError(f"--metrics-addr: {err}") from None
    if not values["verify_stall_seconds"] > 0:
        raise ConfigError(f"--verify-stall-seconds must be more than 0, not {values['verify_stall_seconds']}")
    if values["tree_cache_nodes"] < 0:
        raise ConfigError(f"--tree-cache-nodes must be 0 or more, not {values['tree_cache_nodes']}")
    if values["read_answer_bytes"] < 0:
        raise ConfigError(f"--read-answer-bytes must be 0 or more, not {values['read_answer_bytes']}")
    if values["read_workers"] < -1:
        raise ConfigError(f"--read-workers must be -1 (sized from the CPUs), 0 or more, not {values['read_workers']}")
    if values["orderer"] == "etcd" and values["follow"]:
        raise ConfigError("--follow makes a read replica; it cannot also be an etcd member")
    if values["follow"] and values["verify_blocks"] == "root":
        raise ConfigError(
            "--verify-blocks root takes the write sets of an etcd member's log; a --follow replica's blocks come "
            "from outside its cluster without them and are always executed again (--verify-blocks full)"
        )
    if values["orderer"] == "etcd" and not values["internal_addr"]:
        raise ConfigError("an etcd member needs --internal-addr: the other members forward and state-sync to it")
    if values["max_streams"] < 1:
        raise ConfigError(f"--max-streams must be 1 or more, not {values['max_streams']}")
    _check_tls(values)


def _check_tls(values: Mapping[str, Any]) -> None:
    if (values["tls_cert"] is None) != (values["tls_key"] is None):
        raise ConfigError("--tls-cert and --tls-key go together")
    if values["tls_client_ca"] is not None and values["tls_cert"] is None:
        raise ConfigError("--tls-client-ca needs --tls-cert and --tls-key (the internal listener serves TLS)")
    if values["tls_cert"] is not None and values["internal_addr"] and values["tls_client_ca"] is None:
        raise ConfigError(
            "with --tls-cert the internal listener requires client certificates: give --tls-client-ca "
            "(the cluster's CA), or --internal-addr '' to serve no internal listener"
        )
    if (values["etcd_cert"] is None) != (values["etcd_key"] is None):
        raise ConfigError("--etcd-cert and --etcd-key go together")
