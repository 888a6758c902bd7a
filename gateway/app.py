"""The gateway's aiohttp application: an app factory, resources in cleanup_ctx (keys in gateway.keys).

    app = build_app(config)      # REST routes, SSE streams, gRPC-web passthrough, OpenAPI

Stateless: every request is answered from an upstream node; events come from
Redis (when configured) or from the gateway's own relay of a node stream.
Only the entry point (gateway.serve, behind gateway.main) and the tests import this module.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from aiohttp import web

from gateway.clientip import ClientAddress
from gateway.config import GatewayConfig
from gateway.events.routes import setup_events
from gateway.keys import BODIES, CLIENTS, CONFIG, EVENTS, METRICS, NODES
from gateway.rest.memo import BodyMemo
from gateway.rest.routes import setup_rest
from gateway.telemetry import GatewayMetrics
from gateway.upstream import NodePool, NodeTLS


async def _nodes(app: web.Application) -> AsyncIterator[None]:
    cfg = app[CONFIG]
    app[NODES] = NodePool(
        cfg.node_addrs,
        internal=cfg.node_internal_addrs,
        tls=NodeTLS.of(cfg),
        read_retries=cfg.read_retries,
        timeout=cfg.request_timeout,
        read_batch=cfg.read_batch,
    )
    yield
    await app[NODES].close()


def build_app(config: GatewayConfig, metrics: GatewayMetrics | None = None) -> web.Application:
    """`metrics`: the process's gateway instruments (served by its MetricsEndpoint), or None for none."""
    app = web.Application(client_max_size=config.max_body_bytes)
    app[CONFIG] = config
    app[CLIENTS] = ClientAddress(config.trusted_proxies)
    app[BODIES] = BodyMemo(config.rest_memo_bytes)
    app.cleanup_ctx.append(_nodes)
    setup_rest(app)
    setup_events(app)
    if metrics is not None:
        setup_metrics(app, metrics)
    return app


def setup_metrics(app: web.Application, metrics: GatewayMetrics) -> None:
    """The request middleware (outermost) and, once the events service exists, its observers."""
    app[METRICS] = metrics
    app.middlewares.insert(0, metrics.middleware)
    metrics.watch_memo(app[BODIES])

    async def observe(app: web.Application) -> AsyncIterator[None]:
        if EVENTS in app:
            metrics.watch(app[EVENTS])
        yield

    app.cleanup_ctx.append(observe)
