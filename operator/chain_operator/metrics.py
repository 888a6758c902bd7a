"""The operator's Prometheus metrics, every one of them defined here (one registry per running operator).

Labels: `namespace` and `network`, the ChainNetwork's (the chart's PodMonitor keeps them with honorLabels, so
they are not renamed to the operator pod's namespace). The PrometheusRule's `chain_operator_*` alerts read
these names; tests/operator/test_metrics.py checks every name the rule uses is registered here.

- snapshots (snapshots.py / handlers.py): failures, time of the last success, whether a job runs;
- rollouts (handlers.py): the upgrade phase as one gauge per phase (1 for the current one).

Off-cluster backups have no operator metric: the chart's backup CronJob runs them, and their alerts read
kube-state-metrics (docs/operations.md).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, Counter, Gauge, start_http_server

from node.errors import ConfigError
from node.observability.address import split_addr

log = logging.getLogger("chain.operator.metrics")
LABELS = ("namespace", "network")
ROLLOUT_PHASES = ("Progressing", "Completed", "Failed")


class OperatorMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.snapshot_failures = Counter(
            "chain_operator_snapshot_failures",
            "Scheduled snapshots that failed (refused start, failed job, job lost with a node restart)",
            LABELS,
            registry=r,
        )
        self.snapshot_last_success = Gauge(
            "chain_operator_snapshot_last_success_timestamp_seconds",
            "Unix time of the last scheduled snapshot recorded as a ChainSnapshot",
            LABELS,
            registry=r,
        )
        self.snapshot_job_running = Gauge(
            "chain_operator_snapshot_job_running",
            "1 while a snapshot job the operator started runs on a node",
            LABELS,
            registry=r,
        )
        self.rollout_phase = Gauge(
            "chain_operator_rollout_phase",
            "1 for the ChainNetwork's current rollout phase (Progressing, Completed, Failed), 0 for the others",
            (*LABELS, "phase"),
            registry=r,
        )

    def names(self) -> set[str]:
        """Every sample name this registry exports (counters with their `_total`)."""
        return {s.name for family in self.registry.collect() for s in family.samples}

    def snapshot_failed(self, namespace: str, network: str) -> None:
        self.snapshot_failures.labels(namespace, network).inc()
        self.snapshot_job_running.labels(namespace, network).set(0)

    def snapshot_succeeded(self, namespace: str, network: str, at: float | None = None) -> None:
        self.snapshot_failures.labels(namespace, network)  # the series exists (0) before the first failure
        self.snapshot_last_success.labels(namespace, network).set(time.time() if at is None else at)
        self.snapshot_job_running.labels(namespace, network).set(0)

    def snapshot_running(self, namespace: str, network: str) -> None:
        self.snapshot_failures.labels(namespace, network)
        self.snapshot_job_running.labels(namespace, network).set(1)

    def rollout(self, namespace: str, network: str, phase: str) -> None:
        for p in ROLLOUT_PHASES:
            self.rollout_phase.labels(namespace, network, p).set(1 if p == phase else 0)


@dataclass
class MetricsServer:
    """The HTTP endpoint (`/metrics`) serving one registry, on its own thread; `port` is the bound one."""

    server: WSGIServer
    port: int

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def serve(metrics: OperatorMetrics, addr: str) -> MetricsServer:
    """Listen on `addr` (host:port; port 0 picks a free one)."""
    try:
        host, port = split_addr(addr)
    except ValueError as exc:
        raise ConfigError(f"--metrics-addr {addr!r}: {exc}") from exc
    server, _thread = start_http_server(port, host, registry=metrics.registry)
    bound = int(server.server_port)
    log.info("metrics on http://%s:%d/metrics", host, bound)
    return MetricsServer(server, bound)
