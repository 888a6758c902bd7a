"""`chain-gateway`: serve REST/SSE until SIGTERM or SIGINT."""

from __future__ import annotations

import asyncio
import json
import logging
import signal
from collections.abc import Sequence

from aiohttp import web

from gateway.app import build_app
from gateway.config import parse_config


async def run(argv: Sequence[str] | None = None) -> None:
    config = parse_config(argv)
    logging.basicConfig(level=config.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s %(message)s")
    app = build_app(config)
    runner = web.AppRunner(app, handler_cancellation=True)
    await runner.setup()
    host, port = config.host_port
    site = web.TCPSite(runner, host, port)
    await site.start()
    bound = port
    for address in runner.addresses:  # the bound port when asked for port 0
        bound = int(address[1])
        break
    print(json.dumps({"event": "ready", "http_port": bound}), flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    for sig in (signal.SIGTERM, signal.SIGINT):  # shutting down already: later repeats change nothing
        loop.remove_signal_handler(sig)
        signal.signal(sig, signal.SIG_IGN)
    await runner.cleanup()


def main(argv: Sequence[str] | None = None) -> None:
    asyncio.run(run(argv))


if __name__ == "__main__":
    main()
