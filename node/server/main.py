"""`chain-node`: run a node until SIGTERM or SIGINT; `chain-node verify-store --data-dir DIR` checks a store offline.

A store the node refuses to open (damaged, foreign, missing: node.errors.StoreRefused) stops it with one
line on stderr and exit status 2 (docs/operations.md).

`chain-node state-sync [FLAGS]` (replicated mode) only joins: it brings DATA_DIR to a store the etcd log
continues, state-syncing from a member's snapshot when needed, then exits 0 (1 with one line on failure).
The chart runs it as an init container, so a restore never eats the startup probe's budget.
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
from node.errors import CONFIG_EXIT_STATUS, ChainError, ConfigError, RestoreFailed, StoreRefused, config_exit
from node.listen import ListenError
from node.observability.logs import configure_logging
from node.observability.tracing import Tracing
from node.server.app import NodeApp
from node.server.config import NodeConfig, parse_config
from node.server.verify_store import main as verify_store


async def state_sync(argv: Sequence[str]) -> int:
    config = parse_config(argv)
    configure_logging(config.log_level, config.log_format)
    if config.orderer != "etcd":
        config_exit("chain-node state-sync", ConfigError("needs --orderer etcd (a replicated member)"))
    node = NodeApp(config)
    try:
        done = await node.join()
    except ConfigError as err:
        config_exit("chain-node state-sync", err)
    except ChainError as err:
        print(f"chain-node state-sync: {err}", file=sys.stderr, flush=True)
        return 1
    finally:
        await node.close_etcd()
    print(json.dumps({"event": "state-sync", "result": done}), flush=True)
    return 0


async def run(argv: Sequence[str] | None = None) -> None:
    config = parse_config(argv)
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
    await stop.wait()
    logging.getLogger("chain.node").info("draining")
    await node.stop()
    for sig in (signal.SIGTERM, signal.SIGINT):  # shutting down already: later repeats change nothing
        loop.remove_signal_handler(sig)
        signal.signal(sig, signal.SIG_IGN)


EXIT_REFUSED = CONFIG_EXIT_STATUS  # a refused store is a configuration-like stop: 2


def main(argv: Sequence[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["verify-store"]:
        raise SystemExit(verify_store(args[1:]))
    if args[:1] == ["state-sync"]:
        raise SystemExit(asyncio.run(state_sync(args[1:])))
    try:
        asyncio.run(run(args))
    except ListenError as err:  # a taken address: one line naming the flag, no traceback, exit status 1
        raise SystemExit(err.line("chain-node")) from None
    except StoreRefused as refused:  # a damaged, foreign or missing store: one line, exit status 2
        print(f"chain-node: refusing to start: {refused}", file=sys.stderr, flush=True)
        raise SystemExit(EXIT_REFUSED) from None
    except RestoreFailed as err:  # --restore or state sync at start-up: one line, exit status 1, nothing installed
        raise SystemExit(f"chain-node: {err}") from None
    except ConfigError as err:
        config_exit("chain-node", err)


if __name__ == "__main__":
    main()
