"""The gateway's aiohttp application: an app factory, typed keys, resources in cleanup_ctx.

    app = build_app(config)      # REST routes, SSE streams, gRPC-web passthrough, OpenAPI

Stateless: every request is answered from an upstream node; events come from
Redis (when configured) or from the gateway's own relay of a node stream.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from aiohttp import web

from gateway.config import GatewayConfig
from gateway.nodes import NodePool

if TYPE_CHECKING:
    from gateway.telemetry import GatewayMetrics

CONFIG: web.AppKey[GatewayConfig] = web.AppKey("config", GatewayConfig)
NODES: web.AppKey[NodePool] = web.AppKey("nodes", NodePool)


async def _nodes(app: web.Application) -> AsyncIterator[None]:
    cfg = app[CONFIG]
    app[NODES] = NodePool(cfg.node_addrs, read_retries=cfg.read_retries, timeout=cfg.request_timeout)
    yield
    await app[NODES].close()


def build_app(config: GatewayConfig, metrics: GatewayMetrics | None = None) -> web.Application:
    """`metrics`: the process's gateway instruments (served by its MetricsEndpoint), or None for none."""
    from gateway.events import setup_events
    from gateway.rest import setup_rest

    app = web.Application(client_max_size=config.max_body_bytes)
    app[CONFIG] = config
    app.cleanup_ctx.append(_nodes)
    setup_rest(app)
    setup_events(app)
    if metrics is not None:
        from gateway.telemetry import setup_metrics

        setup_metrics(app, metrics)
    return app
