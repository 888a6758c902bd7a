"""Command-line flags that are also environment variables, for every console command of the project.

    parser = argparse.ArgumentParser(...)            # flags as usual
    env_defaults(parser, "CHAIN_NODE_", os.environ, lists={"cors_origins"})
    ns = parser.parse_args(argv)                     # a flag given on the command line wins

`--grpc-addr` is read from `CHAIN_NODE_GRPC_ADDR` (the prefix, then the flag's first spelling in upper
case, dashes to underscores). A repeatable flag named in `lists` takes a comma-separated list. A value is
converted and checked as argparse would check the flag (its `type` and `choices`), and a bad one stops the
command with a usage error naming the variable, never a traceback.
"""

from __future__ import annotations

import argparse
from collections.abc import Collection, Mapping


def env_name(prefix: str, action: argparse.Action) -> str:
    return prefix + action.option_strings[0].lstrip("-").replace("-", "_").upper()


def env_defaults(
    parser: argparse.ArgumentParser, prefix: str, env: Mapping[str, str], *, lists: Collection[str] = ()
) -> None:
    """Set the parser's defaults from the environment (see the module doc)."""
    defaults: dict[str, object] = {}
    for action in parser._actions:
        if not action.option_strings or action.dest == "help":
            continue
        name = env_name(prefix, action)
        if name not in env:
            continue
        raw = env[name]
        if action.dest in lists:
            defaults[action.dest] = [v.strip() for v in raw.split(",") if v.strip()]
            continue
        try:
            value = action.type(raw) if callable(action.type) else raw
        except (TypeError, ValueError) as err:
            parser.error(f"{name}={raw!r}: {err}")
        if action.choices is not None and value not in action.choices:
            parser.error(f"{name}={raw!r}: choose from {', '.join(map(str, action.choices))}")
        defaults[action.dest] = value
    parser.set_defaults(**defaults)
