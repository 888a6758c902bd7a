"""What `chain-node` runs once its command line is parsed: the node until SIGTERM/SIGINT, or `state-sync`.

node.server.main (the console script's module) imports only the argument parser and reaches this module
through node.entry.lazy, so `chain-node --help`, a bad flag, and every spawned verify worker (which
re-imports the parent's main module) skip grpc, aiohttp, OpenTelemetry and the store.
"""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from node.authority import Authority
from node.errors import (
    CONFIG_EXIT_STATUS,
    RESTART_EXIT_STATUS,
    ChainError,
    ConfigError,
    MustRestart,
    RestoreFailed,
    StoreRefused,
    config_exit,
)
from node.listen import ListenError
from node.observability.logs import configure_logging
from node.observability.tracing import Tracing
from node.server.app import NodeApp
from node.server.bootstrap import Bootstrap
from node.server.config import NodeConfig, parse_config


async def state_sync(argv: Sequence[str]) -> int:
    config = parse_config(argv)
    configure_logging(config.log_level, config.log_format)
    if config.orderer != "etcd":
        config_exit("chain-node state-sync", ConfigError("needs --orderer etcd (a replicated member)"))
    bootstrap = Bootstrap(config)
    try:
        done = await bootstrap.join()
    except ConfigError as err:
        config_exit("chain-node state-sync", err)
    except ChainError as err:
        print(f"chain-node state-sync: {err}", file=sys.stderr, flush=True)
        return 1
    finally:
        await bootstrap.close()
    print(json.dumps({"event": "state-sync", "result": done}), flush=True)
    return 0


async def run(config: NodeConfig) -> None:
    configure_logging(config.log_level, config.log_format)
    try:
        tracing = Tracing.from_env("chain-node")  # on when OTEL_EXPORTER_OTLP_ENDPOINT is set
    except ValueError as err:
        raise ConfigError(str(err)) from None
    tracing.start()
    try:
        await _serve(config, tracing)
    finally:
        tracing.stop()


async def _serve(config: NodeConfig, tracing: Tracing) -> None:
    node = NodeApp(config, tracer_provider=tracing.provider)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):  # before the ready line: a SIGTERM right after it drains cleanly
        loop.add_signal_handler(sig, stop.set)
    await node.start()
    print(node.ready_line(), flush=True)
    if node.devnet_authority:
        authority = Authority.load(Path(node.devnet_authority))
        print(
            f"devnet storage authority 0x{authority.wallet.address.hex()}; its keys: {node.devnet_authority}\n"
            f"fund an account: chainctl account fund ADDRESS --units 1 --authority {node.devnet_authority}",
            file=sys.stderr,
            flush=True,
        )
    await _first(stop, node.left)
    logging.getLogger("chain.node").info("draining")
    await node.stop()
    for sig in (signal.SIGTERM, signal.SIGINT):  # shutting down already: later repeats change nothing
        loop.remove_signal_handler(sig)
        signal.signal(sig, signal.SIG_IGN)
    if node.leaving:
        raise MustRestart(node.leaving)


async def _first(*events: asyncio.Event) -> None:
    """Until one of `events` is set."""
    waits = [asyncio.create_task(event.wait()) for event in events]
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for wait in waits:
            wait.cancel()


EXIT_REFUSED = CONFIG_EXIT_STATUS  # a refused store is a configuration-like stop: 2


def state_sync_main(argv: Sequence[str]) -> int:
    return asyncio.run(state_sync(argv))


def main(config: NodeConfig) -> None:
    try:
        asyncio.run(run(config))
    except ListenError as err:  # a taken address: one line naming the flag, no traceback, exit status 1
        raise SystemExit(err.line("chain-node")) from None
    except StoreRefused as refused:  # a damaged, foreign or missing store: one line, exit status 2
        print(f"chain-node: refusing to start: {refused}", file=sys.stderr, flush=True)
        raise SystemExit(EXIT_REFUSED) from None
    except RestoreFailed as err:  # --restore or state sync at start-up: one line, exit status 1, nothing installed
        raise SystemExit(f"chain-node: {err}") from None
    except MustRestart as err:  # drained; the next start state-syncs: one line, exit status 75
        print(f"chain-node: exiting so that the next start state-syncs: {err}", file=sys.stderr, flush=True)
        raise SystemExit(RESTART_EXIT_STATUS) from None
    except ConfigError as err:
        config_exit("chain-node", err)
