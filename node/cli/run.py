"""Running one parsed chainctl command: the context, the handler, and every failure as one line.

Imported by node.cli.main only once a command is to run; ``chainctl --help`` never loads it. It imports
neither grpc nor protobuf itself: a failure from the node or from git can only be raised once the command
has loaded that module, so the failures are recognised through ``sys.modules`` and the offline commands
(keys, git-hash) run without the RPC stack (tests/test_startup_imports.py).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Mapping
from types import MappingProxyType
from typing import TextIO

from node.cli.common import CliError, Context, dump_json, one_line
from node.cli.config import StoreError, default_home
from node.entry import lazy
from node.errors import CliCode, ConfigError, Reason

EXIT_ERROR = 1
TRACEBACK_ENV = "CHAINCTL_TRACEBACK"
# A bare 20- or 32-byte hex value (an address, project id or hash) in a node's message: printed 0x-prefixed,
# as chainctl prints them everywhere else. Git ids (GIT_ERROR) are left as git prints them.
BARE_HEX_RE = re.compile(r"(?<![0-9A-Za-z])([0-9a-fA-F]{64}|[0-9a-fA-F]{40})(?![0-9A-Za-z])")
HINTS: Mapping[str, str] = MappingProxyType(
    {Reason.NO_STORAGE: "grant the account storage first: chainctl account fund ADDRESS --units N --authority FILE"}
)


def explain(reason: str, message: str) -> str:
    """The one line chainctl prints: hex values 0x-prefixed, and what to do where chainctl knows."""
    # A ref name or path that is not UTF-8 reaches here with lone surrogates (surrogateescape): print its
    # bytes as \xNN so stderr and the --json document stay encodable.
    text = one_line(message).encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    if reason != CliCode.GIT_ERROR:
        text = BARE_HEX_RE.sub(r"0x\1", text)
    hint = HINTS.get(reason)
    return f"{text}; {hint}" if hint else text


def report(ctx: Context, reason: str, message: str) -> int:
    text = explain(reason, message)
    ctx.err.write(f"error: {reason}: {text}\n")
    ctx.err.flush()
    if ctx.json:
        ctx.out.write(dump_json({"error": {"reason": reason, "message": text}}) + "\n")
    return EXIT_ERROR


def known_failure(ctx: Context, exc: Exception) -> int | None:
    """The exit status of a failure from git or from the node, reported; None for any other exception."""
    git = sys.modules.get("node.sdk.git")
    if git is not None and isinstance(exc, git.GitError):
        return report(ctx, CliCode.GIT_ERROR, str(exc))
    grpc = sys.modules.get("grpc")
    if grpc is not None and isinstance(exc, grpc.RpcError):
        return report(ctx, *lazy("node.cli.online", "rpc_failure")(ctx, exc))
    return None


def unexpected(ctx: Context, exc: Exception) -> int:
    """Any other failure, still one line: a file that cannot be read is the argument naming it; anything else
    is chainctl's own fault, with its type (``CHAINCTL_TRACEBACK=1`` raises it instead, traceback and all)."""
    if os.environ.get(TRACEBACK_ENV):
        raise exc
    if isinstance(exc, OSError) and exc.filename is not None:
        return report(ctx, CliCode.INVALID_ARGUMENT, f"{exc.filename}: {exc.strerror or exc}")
    return report(ctx, CliCode.UNKNOWN, f"{type(exc).__name__}: {exc} (set {TRACEBACK_ENV}=1 to see where)")


def execute(args: argparse.Namespace, node: str, out: TextIO, err: TextIO) -> int:
    ctx = Context(
        node=node,
        home=args.home.expanduser() if args.home is not None else default_home(),
        json=args.json,
        account_ref=args.account,
        timeout=args.timeout,
        retry_seconds=args.retry_seconds,
        ca_file=args.ca_file,
        out=out,
        err=err,
    )
    try:
        status = args.func(ctx, args)  # None, or the exit status of a command that reported its own failures
    except CliError as exc:
        return report(ctx, exc.reason, exc.message)
    except StoreError as exc:
        return report(ctx, exc.reason, str(exc))
    except ConfigError as exc:  # a --ca-file that cannot be read (node.tls.TLSFileError)
        return report(ctx, CliCode.INVALID_ARGUMENT, str(exc))
    except Exception as exc:
        code = known_failure(ctx, exc)
        return unexpected(ctx, exc) if code is None else code
    except KeyboardInterrupt:
        return report(ctx, CliCode.INTERRUPTED, "interrupted")
    finally:
        ctx.close()
    return int(status or 0)
