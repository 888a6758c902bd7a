"""chainctl: the command-line client of a chain node (keys, accounts, projects, push, query).

    chainctl [--node ADDR] [--home DIR] [--json] [--account ADDR|NAME] COMMAND ...

Failures print ``error: <REASON_CODE>: <explanation>`` on stderr and exit 1 (2 for usage errors).
See docs/chainctl.md.

Imports are all at module level. Start-up is dominated by grpc, the protobuf descriptors and the keccak
of pycryptodome (its cffi parse), which almost every command needs (`python -X importtime -c "import
node.cli.main"`); the one function-level import chainctl had (in `status`) loaded modules that were
already loaded and saved nothing measurable, so it went.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import grpc

from chain.v1 import rpc_pb2
from node.cli import account, keys, project, push, query
from node.cli.common import (
    DEFAULT_NODE,
    NODE_ENV,
    CliError,
    Context,
    dump_json,
    env_default,
    one_line,
    rpc_error_line,
    to_json,
)
from node.cli.config import StoreError, default_home
from node.errors import CliCode
from node.sdk.git import GitError

EXIT_ERROR = 1


def status(ctx: Context, args: argparse.Namespace) -> None:
    resp = ctx.client.stub.GetNodeStatus(rpc_pb2.GetNodeStatusRequest(), timeout=ctx.timeout)
    ctx.emit(to_json(resp.status))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="chainctl",
        description="Client of a chain node: keys, accounts, projects, git push, queries.",
        epilog="Errors print `error: REASON_CODE: explanation` on stderr and exit non-zero.",
    )
    parser.add_argument("--node", default=None, help=f"node gRPC address (env {NODE_ENV}, default {DEFAULT_NODE})")
    parser.add_argument(
        "--home", type=Path, default=None, help="key store directory (env CHAINCTL_HOME, default ~/.chainctl)"
    )
    parser.add_argument("--json", action="store_true", help="machine-readable JSON output")
    parser.add_argument("--account", default=None, help="act as this initialized account (address or key name)")
    parser.add_argument("--timeout", type=float, default=30.0, help="per-call timeout in seconds")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    keys.register(sub)
    account.register(sub)
    project.register(sub)
    push.register(sub)
    query.register(sub)
    p = sub.add_parser("status", help="the node's status (GetNodeStatus)")
    p.set_defaults(func=status)
    return parser


def report(ctx: Context, reason: str, message: str) -> int:
    text = one_line(message)
    ctx.err.write(f"error: {reason}: {text}\n")
    ctx.err.flush()
    if ctx.json:
        ctx.out.write(dump_json({"error": {"reason": reason, "message": text}}) + "\n")
    return EXIT_ERROR


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, extras = parser.parse_known_args(argv)
    if extras and all(x == "--json" for x in extras):
        args.json = True  # `--json` is accepted after the command too
    elif extras:
        parser.error(f"unrecognized arguments: {' '.join(extras)}")
    ctx = Context(
        node=args.node or env_default(NODE_ENV, DEFAULT_NODE),
        home=args.home.expanduser() if args.home is not None else default_home(),
        json=args.json,
        account_ref=args.account,
        timeout=args.timeout,
        out=sys.stdout,
        err=sys.stderr,
    )
    try:
        args.func(ctx, args)
    except CliError as exc:
        return report(ctx, exc.reason, exc.message)
    except StoreError as exc:
        return report(ctx, exc.reason, str(exc))
    except GitError as exc:
        return report(ctx, CliCode.GIT_ERROR, str(exc))
    except grpc.RpcError as exc:
        return report(ctx, *rpc_error_line(exc))
    except KeyboardInterrupt:
        return report(ctx, CliCode.INTERRUPTED, "interrupted")
    finally:
        ctx.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
