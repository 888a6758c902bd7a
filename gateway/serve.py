"""`chain-gateway` once its command line is parsed: serve REST/SSE until SIGTERM or SIGINT.

gateway.main (the console script's module) reaches this module through node.entry.lazy, so
`chain-gateway --help` and a bad flag skip aiohttp, grpc and OpenTelemetry."""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import signal
import socket
import ssl
import sys
from dataclasses import replace

import uvloop
from aiohttp import web

from gateway.accesslog import LeanAccessLogger
from gateway.app import build_app
from gateway.config import GatewayConfig
from gateway.connections import ConnectionGuard, GuardedSite
from gateway.events.redis_client import check_redis
from gateway.keys import CLIENTS
from gateway.protocol import json_error_protocol
from gateway.telemetry import GatewayMetrics
from gateway.upstream import NodeTLS
from gateway.workers import Supervisor, channel_fd, handed_connections, supervise, tell_ready
from node.errors import ConfigError, config_exit
from node.listen import ListenError, check_free
from node.observability.logs import configure_logging
from node.observability.metrics import MetricsEndpoint
from node.observability.tracing import Tracing
from node.tls import ServerTLS, plaintext_warning

log = logging.getLogger("chain.gateway")


def listener_tls(config: GatewayConfig) -> ServerTLS | None:
    """The HTTP listener's certificate (read again when renewed on disk), or None for plaintext: then, beyond
    loopback, the one warning line that says so. TLSFileError (one line) for files that do not load."""
    if config.tls_cert is None or config.tls_key is None:
        warning = plaintext_warning("chain-gateway", "--http-addr", config.http_addr)
        if warning is not None and channel_fd() < 0:  # said once, by the process that binds the address
            log.warning("%s", warning)
        return None
    return ServerTLS(config.tls_cert, config.tls_key)


async def run(config: GatewayConfig) -> None:
    configure_logging(config.log_level, config.log_format)
    worker_fd = channel_fd()  # >= 0 in a worker of a --workers parent (gateway/workers.py)
    if worker_fd >= 0 and config.metrics_addr:  # a worker: the parent serves --metrics-addr
        config = replace(config, metrics_addr="127.0.0.1:0")
    try:
        tracing = Tracing.from_env("chain-gateway")  # on when OTEL_EXPORTER_OTLP_ENDPOINT is set
    except ValueError as err:
        raise ConfigError(str(err)) from None
    endpoint = MetricsEndpoint("chain-gateway", config.metrics_addr)
    if worker_fd < 0:
        check_free("--http-addr", config.http_addr)  # a taken address stops here with one line (main)
    tls = listener_tls(config)
    NodeTLS.of(config).check()  # the nodes' CA and the client certificate: a bad file is one line now
    if worker_fd < 0:
        await check_redis(config)  # wrong credentials or TLS: one line now, not a relay that retries forever
    if config.workers > 1:
        await _supervise(config, endpoint, sys.argv[1:])  # the workers get the command line's flags
        return
    tracing.start()  # before the app, its channels and its Redis client exist
    try:
        metrics_port = endpoint.start()
        metrics = GatewayMetrics(endpoint) if endpoint.enabled else None
        await _serve(config, metrics, metrics_port, worker_fd, tls.ssl_context() if tls is not None else None)
    finally:
        endpoint.stop()
        tracing.stop()


async def _supervise(config: GatewayConfig, endpoint: MetricsEndpoint, argv: list[str]) -> None:
    """--workers N: this process holds the address and deals connections (gateway/workers.py)."""
    sup = Supervisor(config, argv)
    port = sup.bind()
    try:
        endpoint.registry.register(sup.metrics)
        metrics_port = endpoint.start()
        code = await supervise(sup, port, metrics_port)
    finally:
        endpoint.stop()
        sup.stop()
    if code:
        raise SystemExit(code)


async def _serve(
    config: GatewayConfig,
    metrics: GatewayMetrics | None,
    metrics_port: int,
    worker_fd: int,
    tls: ssl.SSLContext | None,
) -> None:
    app = build_app(config, metrics)
    guard = ConnectionGuard(config.header_timeout, config.max_connections)
    if metrics is not None:
        metrics.watch_connections(guard)  # chain.http.connections: what the chart's HPA scales on
    app.middlewares.insert(0, guard.middleware)  # outermost: marks a request's headers complete
    runner = web.AppRunner(
        app,
        handler_cancellation=True,
        keepalive_timeout=config.idle_timeout,
        access_log_class=LeanAccessLogger.keyed(app[CLIENTS]),  # the client as --trusted-proxies finds it
    )
    await runner.setup()
    # What start-up built (the OpenAPI document and its validators, protobuf descriptors, the route table)
    # lives as long as the process: out of the collector's reach, a full collection no longer walks it.
    gc.freeze()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    if worker_fd >= 0:
        server = runner.server
        assert server is not None
        factory = guard.factory(lambda: json_error_protocol(server))
        starting: set[asyncio.Task[object]] = set()

        def serve(sock: socket.socket) -> None:
            sock.setblocking(False)
            task: asyncio.Task[object] = loop.create_task(loop.connect_accepted_socket(factory, sock, ssl=tls))
            starting.add(task)
            task.add_done_callback(starting.discard)

        tell_ready(handed_connections(worker_fd, serve, stop.set), metrics_port)
    else:
        await _listen(config, runner, guard, metrics_port, tls)
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    for sig in (signal.SIGTERM, signal.SIGINT):  # shutting down already: later repeats change nothing
        loop.remove_signal_handler(sig)
        signal.signal(sig, signal.SIG_IGN)
    await runner.cleanup()


async def _listen(
    config: GatewayConfig, runner: web.AppRunner, guard: ConnectionGuard, metrics_port: int, tls: ssl.SSLContext | None
) -> None:
    host, port = config.host_port
    # exclusive (no SO_REUSEPORT), header deadline, connection cap; TLS when --tls-cert is given
    site = GuardedSite(runner, host, port, guard, ssl_context=tls)
    try:
        await site.start()
    except OSError as err:
        await runner.cleanup()
        raise ListenError("--http-addr", config.http_addr, err.strerror or str(err)) from None
    bound = port
    for address in runner.addresses:  # the bound port when asked for port 0
        bound = int(address[1])
        break
    ready = {"event": "ready", "http_port": bound, "metrics_port": metrics_port, "tls": tls is not None}
    print(json.dumps(ready), flush=True)


def main(config: GatewayConfig) -> None:
    try:
        uvloop.run(run(config))  # the event loop: uvloop (its TCP transports cost less per request)
    except ListenError as err:  # a taken address: one line naming the flag, no traceback, exit status 1
        raise SystemExit(err.line("chain-gateway")) from None
    except ConfigError as err:
        config_exit("chain-gateway", err)
