"""`chain-gateway`: serve REST/SSE until SIGTERM or SIGINT (the work is in gateway/serve.py).

This module imports only the argument parser: gateway.serve (aiohttp, grpc, OpenTelemetry) loads through
node.entry.lazy once the command line is parsed, so `--help` and a bad flag answer at once.
"""

from __future__ import annotations

from collections.abc import Sequence

from gateway.config import parse_config
from node.entry import lazy

SERVE = lazy("gateway.serve", "main")  # node/entry.py


def main(argv: Sequence[str] | None = None) -> None:
    SERVE(parse_config(argv))


if __name__ == "__main__":
    main()
