"""The operator's one frozen configuration: flags, each also read from `CHAIN_OPERATOR_<FLAG>`.

A value argparse accepts but the operator cannot work with (a zero or negative period) is a `ConfigError`;
`chain-operator` prints it as one line and exits 2.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from node.envflags import add_version, describe_env, env_defaults
from node.errors import ConfigError
from node.observability.address import split_addr
from node.tls import ClientTLS

ENV_PREFIX = "CHAIN_OPERATOR_"


@dataclass(frozen=True)
class OperatorConfig:
    # Namespaces to watch; empty = the whole cluster (needs a ClusterRole).
    namespaces: tuple[str, ...] = ()
    # Bearer token of the nodes' AdminService (the chart passes the same Secret to both); sent only over TLS or
    # to a loopback address.
    admin_token: str = ""
    # TLS to the node pods (nodes.py): the cluster CA their certificates chain to (set: every call to a pod is
    # TLS), the operator's client certificate and key for the nodes' admin listener (mutual TLS), and the name
    # checked against a pod's certificate ({pod}, {subdomain} and {namespace} filled in from the pod; empty:
    # {pod}.{subdomain}.{namespace}.svc for a pod of a StatefulSet, else its IP).
    node_ca_file: Path | None = None
    node_tls_cert: Path | None = None
    node_tls_key: Path | None = None
    node_server_name: str = ""
    # How often each ChainNetwork is checked for a due snapshot.
    snapshot_tick: float = 30.0
    # Deadline of every gRPC call to a node.
    rpc_timeout: float = 10.0
    # How often a rolling upgrade re-checks the pod it is waiting for.
    upgrade_poll: float = 5.0
    # How long one pod may take to come back Ready, SERVING and caught up before the upgrade stops.
    pod_timeout: float = 900.0
    # Rollout gates (gates.py): every member within this many blocks of the leader ...
    max_lag_blocks: int = 10
    # ... and serving, Ready and caught up on this many checks in a row, spaced this many seconds apart,
    # before the next pod is released.
    stable_checks: int = 3
    stable_interval: float = 10.0
    # How often each ChainNetwork's StatefulSet is compared with its pods: a pod template changed by anyone
    # (helm, a GitOps sync, kubectl) starts the same gated rollout as a new version (revisions.py).
    rollout_check: float = 30.0
    # Take a snapshot before a rollout releases its first pod (rollout_snapshot.py).
    rollout_snapshot: bool = True
    # A snapshot job running longer than this on a node counts as failed (the schedule then retries).
    snapshot_job_timeout: float = 6 * 3600.0
    # kopf's liveness endpoint (e.g. http://0.0.0.0:8080/healthz); empty disables it.
    # etcd membership (etcd_cluster.py): how often it is looked at, how long a member may answer nothing
    # before it is replaced, and the client certificate etcd asks for (with an https etcd)
    etcd_tick: float = 10.0
    etcd_replace_after: float = 300.0
    etcd_ca_file: Path | None = None
    etcd_cert: Path | None = None
    etcd_key: Path | None = None
    liveness: str = ""
    # Prometheus endpoint of the operator's metrics (metrics.py), host:port; empty disables it.
    metrics_addr: str = ""
    log_level: str = "info"

    def etcd_tls(self) -> ClientTLS | None:
        """The etcd client's TLS files; None: the system's roots and no client certificate."""
        if self.etcd_ca_file is None and self.etcd_cert is None:
            return None
        return ClientTLS(self.etcd_ca_file, self.etcd_cert, self.etcd_key, flags=ETCD_TLS_FLAGS)

    def node_tls(self) -> ClientTLS | None:
        """How the operator checks the pods' certificates and presents its own; None: plaintext to the pods."""
        if self.node_ca_file is None:
            return None
        return node_tls(self.node_ca_file, self.node_tls_cert, self.node_tls_key)


LIST_FLAGS = frozenset({"namespaces"})
ETCD_TLS_FLAGS = ("--etcd-ca-file", "--etcd-cert", "--etcd-key")
# Periods and deadlines (seconds): each must be positive.
POSITIVE = (
    "snapshot_tick",
    "rpc_timeout",
    "upgrade_poll",
    "pod_timeout",
    "stable_interval",
    "snapshot_job_timeout",
    "rollout_check",
    "etcd_tick",
    "etcd_replace_after",
)


def _parser() -> argparse.ArgumentParser:
    d = OperatorConfig()
    p = argparse.ArgumentParser(prog="chain-operator", description="Kubernetes operator for chain networks.")
    p.add_argument(
        "--namespace",
        action="append",
        dest="namespaces",
        default=None,
        metavar="NAMESPACE",
        help="namespace to watch; none: the whole cluster",
    )
    p.add_argument("--admin-token", default=d.admin_token, help="bearer token of the nodes' AdminService")
    p.add_argument(
        "--node-ca-file", type=Path, default=None, help="cluster CA of the node pods' certificates (enables TLS)"
    )
    p.add_argument("--node-tls-cert", type=Path, default=None, help="client certificate for the nodes' admin listener")
    p.add_argument("--node-tls-key", type=Path, default=None, help="private key of --node-tls-cert")
    p.add_argument(
        "--node-server-name",
        default=d.node_server_name,
        help="name checked against a pod's certificate, with {pod}, {subdomain}, {namespace}; "
        "empty: {pod}.{subdomain}.{namespace}.svc (a StatefulSet's pod), else the pod IP",
    )
    p.add_argument("--snapshot-tick", type=float, default=d.snapshot_tick, help="seconds between schedule checks")
    p.add_argument("--rpc-timeout", type=float, default=d.rpc_timeout, help="deadline of node gRPC calls (s)")
    p.add_argument("--upgrade-poll", type=float, default=d.upgrade_poll, help="seconds between upgrade checks")
    p.add_argument("--pod-timeout", type=float, default=d.pod_timeout, help="seconds a pod may take to catch up")
    p.add_argument("--max-lag-blocks", type=int, default=d.max_lag_blocks, help="gate: blocks behind the leader")
    p.add_argument("--stable-checks", type=int, default=d.stable_checks, help="gate: good checks in a row")
    p.add_argument("--stable-interval", type=float, default=d.stable_interval, help="gate: seconds between checks")
    p.add_argument(
        "--snapshot-job-timeout", type=float, default=d.snapshot_job_timeout, help="seconds a snapshot job may run"
    )
    p.add_argument("--rollout-check", type=float, default=d.rollout_check, help="seconds between pod template checks")
    p.add_argument(
        "--rollout-snapshot",
        choices=("on", "off"),
        default="on" if d.rollout_snapshot else "off",
        help="take a snapshot before a rollout releases its first pod",
    )
    p.add_argument("--etcd-tick", type=float, default=d.etcd_tick, help="seconds between etcd membership checks")
    p.add_argument(
        "--etcd-replace-after",
        type=float,
        default=d.etcd_replace_after,
        help="seconds an etcd member may answer nothing before it is removed and added again",
    )
    p.add_argument("--etcd-ca-file", type=Path, default=None, help="CA of the etcd members' certificates")
    p.add_argument("--etcd-cert", type=Path, default=None, help="client certificate etcd asks for")
    p.add_argument("--etcd-key", type=Path, default=None, help="private key of --etcd-cert")
    p.add_argument("--liveness", default=d.liveness, help="liveness endpoint URL, e.g. http://0.0.0.0:8080/healthz")
    p.add_argument("--metrics-addr", default=d.metrics_addr, help="Prometheus metrics host:port; '' disables")
    p.add_argument("--log-level", default=d.log_level, help="debug, info, warning or error")
    describe_env(p, ENV_PREFIX, lists=LIST_FLAGS)
    add_version(p)
    return p


def parse_config(argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None) -> OperatorConfig:
    env = os.environ if env is None else env
    parser = _parser()
    env_defaults(parser, ENV_PREFIX, env, lists=LIST_FLAGS)
    values = vars(parser.parse_args(argv))
    values["namespaces"] = tuple(values["namespaces"] or ())
    values["rollout_snapshot"] = values["rollout_snapshot"] == "on"
    for name in POSITIVE:
        if not values[name] > 0:
            flag = "--" + name.replace("_", "-")
            raise ConfigError(f"{flag} must be a positive number of seconds, not {values[name]}")
    if values["metrics_addr"]:
        try:
            split_addr(values["metrics_addr"])
        except ValueError as exc:
            raise ConfigError(f"--metrics-addr: {exc}") from exc
    if values["max_lag_blocks"] < 0 or values["stable_checks"] < 1:
        raise ConfigError("--max-lag-blocks must be >= 0 and --stable-checks >= 1")
    _check_tls(values)
    return OperatorConfig(**values)


def _check_tls(values: Mapping[str, object]) -> None:
    """TLS flags that cannot work together, and files that cannot be read, refused at start (one line)."""
    paths = {k: v for k, v in values.items() if isinstance(v, Path)}
    cert, key, ca = paths.get("node_tls_cert"), paths.get("node_tls_key"), paths.get("node_ca_file")
    if (cert is None) != (key is None):
        raise ConfigError("--node-tls-cert and --node-tls-key go together")
    if cert is not None and ca is None:
        raise ConfigError("--node-tls-cert needs --node-ca-file (the client certificate is for TLS to the pods)")
    if ca is not None:
        node_tls(ca, cert, key).check()  # a TLSFileError names the flag and the file
    template = str(values["node_server_name"])
    try:
        template.format(pod="p", subdomain="s", namespace="n")
    except (KeyError, IndexError, ValueError) as exc:
        raise ConfigError(
            f"--node-server-name {template!r}: only {{pod}}, {{subdomain}}, {{namespace}}: {exc}"
        ) from None


def node_tls(ca: Path, cert: Path | None, key: Path | None) -> ClientTLS:
    return ClientTLS(ca, cert, key, flags=("--node-ca-file", "--node-tls-cert", "--node-tls-key"))
