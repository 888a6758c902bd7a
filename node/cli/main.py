"""chainctl: the command-line client of a chain node (keys, accounts, projects, push, query).

    chainctl [--node ADDR] [--home DIR] [--json] [--account ADDR|NAME] COMMAND ...

Failures print one line, ``error: <REASON_CODE>: <explanation>``, on stderr and exit 1; a usage error (an
unknown flag, a number out of its range) is the same one line with ``INVALID_ARGUMENT`` and exits 2.
See docs/chainctl.md.

Start-up: this module and node.cli.commands (the whole parser) import only the standard library, so
``chainctl --help``, ``--version`` and ``completion`` stay fast; node.cli.run (grpc, protobuf, crypto:
~0.6 s of CPU) is imported once a command is about to run, and each command's module when it runs
(``node.entry.lazy``). Measure with ``python -X importtime -m node.cli.main --help``.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from node.cli import completion
from node.cli.address import AddressError, node_target
from node.cli.argtypes import Parser, seconds
from node.cli.commands import register_all
from node.entry import lazy
from node.envflags import env_name

ENV_PREFIX = "CHAINCTL_"
DEFAULT_NODE = "localhost:50051"
DEFAULT_HOME = "~/.chainctl"
DIST = "chain-node"
EXECUTE = lazy("node.cli.run", "execute")  # node/entry.py: imported once a command is about to run


class VersionAction(argparse.Action):
    """``--version``: the installed package's version (read only when asked)."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, **kw: object) -> None:
        super().__init__(option_strings, dest=dest, default=argparse.SUPPRESS, nargs=0, help="print the version")

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        from importlib.metadata import PackageNotFoundError, version  # noqa: PLC0415, RUF100 - lazy: only for --version

        try:
            text = version(DIST)
        except PackageNotFoundError:
            text = "unknown (not installed)"
        sys.stdout.write(f"chainctl {text}\n")
        parser.exit(0)


def _env_help(flag: str, default: str) -> str:
    return f"(env {ENV_PREFIX}{flag.lstrip('-').replace('-', '_').upper()}, default: {default})"


def build_parser() -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = Parser(
        prog="chainctl",
        description="Client of a chain node: keys, accounts, projects, git push, queries.",
        epilog="Errors print 'error: REASON_CODE: explanation' on stderr and exit 1 (2 for usage errors).",
    )
    parser.add_argument("--version", action=VersionAction)
    parser.add_argument(
        "--node",
        default=DEFAULT_NODE,
        help="node gRPC address: HOST[:PORT], grpc://HOST[:PORT] or http://HOST[:PORT] (plaintext), "
        f"grpcs://HOST[:PORT] or https://HOST[:PORT] (TLS); the port defaults to 50051 "
        f"{_env_help('--node', DEFAULT_NODE)}",
    )
    parser.add_argument(
        "--ca-file",
        type=Path,
        default=None,
        help="PEM CA bundle a grpcs:// node's certificate must chain to "
        f"{_env_help('--ca-file', 'the system CA roots')}",
    )
    parser.add_argument(
        "--home", type=Path, default=None, help=f"key store directory {_env_help('--home', DEFAULT_HOME)}"
    )
    parser.add_argument("--json", action="store_true", help="machine-readable JSON output (default: off)")
    parser.add_argument(
        "--account",
        default=None,
        help="act as this initialized account, by address or key name "
        f"{_env_help('--account', 'the key store default account')}",
    )
    parser.add_argument(
        "--timeout",
        type=seconds(allow_zero=False),
        default=30.0,
        help=f"per-call timeout in seconds, more than 0 {_env_help('--timeout', '30')}",
    )
    parser.add_argument(
        "--retry-seconds",
        type=seconds(allow_zero=True),
        default=30.0,
        help="how long a write the node refuses for now (no leader yet, draining, a store that cannot write: "
        f"it says when to retry) is sent again; 0 fails at once {_env_help('--retry-seconds', '30')}",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    register_all(sub)
    p = sub.add_parser("status", help="the node's status (GetNodeStatus)")
    p.set_defaults(func=lazy("node.cli.online", "status"))
    completion.register(sub, build_parser)
    completion.show_defaults(parser)
    return parser


def env_defaults(parser: argparse.ArgumentParser, env: Mapping[str, str]) -> None:
    """CHAINCTL_NODE, CHAINCTL_HOME, CHAINCTL_ACCOUNT, CHAINCTL_TIMEOUT, CHAINCTL_RETRY_SECONDS, CHAINCTL_CA_FILE
    set the global flags' defaults."""
    defaults: dict[str, object] = {}
    for action in parser._actions:
        if action.dest not in ("node", "home", "account", "timeout", "retry_seconds", "ca_file"):
            continue
        name = env_name(ENV_PREFIX, action)
        if env.get(name):
            try:
                defaults[action.dest] = action.type(env[name]) if callable(action.type) else env[name]
            except (ValueError, argparse.ArgumentTypeError) as err:
                parser.error(f"{name}={env[name]!r}: {err}")
    parser.set_defaults(**defaults)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    env_defaults(parser, os.environ)
    args, extras = parser.parse_known_args(argv)
    if extras and all(x == "--json" for x in extras):
        args.json = True  # `--json` is accepted after the command too
    elif extras:
        parser.error(f"unrecognized arguments: {' '.join(extras)}")
    if getattr(args, "run_here", None) is not None:
        return int(args.run_here(args, sys.stdout))
    try:
        node = node_target(args.node)
    except AddressError as err:
        parser.error(f"--node: {err}")
    if args.ca_file is not None and not node.startswith("grpcs://"):
        parser.error(f"--ca-file is for a TLS node, and --node {args.node} is plaintext: use grpcs://HOST:PORT")
    os.environ.setdefault("GRPC_VERBOSITY", "NONE")  # gRPC's own handshake logs; chainctl says it in one line
    return int(EXECUTE(args, node, sys.stdout, sys.stderr))  # grpc/protobuf/crypto load only now


if __name__ == "__main__":
    sys.exit(main())
