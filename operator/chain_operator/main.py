"""`chain-operator`: run the kopf operator until SIGTERM."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

import kopf

from chain_operator import etcd_cluster
from chain_operator.config import OperatorConfig, parse_config
from chain_operator.handlers import Runtime, build_registry
from chain_operator.metrics import OperatorMetrics, serve
from node.errors import ConfigError, config_exit


def registry(config: OperatorConfig) -> kopf.OperatorRegistry:
    """Every handler: the network's (handlers.py) and the etcd membership timer (etcd_cluster.py)."""
    built = build_registry(config)
    etcd_cluster.register(built, config)
    return built


async def run_operator(
    config: OperatorConfig, stop_flag: asyncio.Event | None = None, metrics: OperatorMetrics | None = None
) -> None:
    """The operator with its handlers, watching `config.namespaces` (or the cluster when empty), and its
    metrics endpoint when `config.metrics_addr` is set."""
    metrics = metrics if metrics is not None else OperatorMetrics()
    endpoint = serve(metrics, config.metrics_addr) if config.metrics_addr else None
    try:
        await kopf.operator(
            registry=registry(config),
            namespaces=config.namespaces,
            clusterwide=not config.namespaces,
            standalone=True,
            liveness_endpoint=config.liveness or None,
            memo=kopf.Memo(runtime=Runtime(config, metrics)),
            stop_flag=stop_flag,
        )
    finally:
        if endpoint is not None:
            endpoint.stop()


def main(argv: Sequence[str] | None = None) -> None:
    try:
        config = parse_config(argv)
    except ConfigError as err:
        config_exit("chain-operator", err)
    logging.basicConfig(level=config.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s %(message)s")
    asyncio.run(run_operator(config))


if __name__ == "__main__":
    main()
