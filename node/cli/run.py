"""Running one parsed chainctl command: the context, the handler, and every failure as one line.

Imported by node.cli.main only once a command is to run (it loads grpc, protobuf and the crypto
libraries); ``chainctl --help`` never loads it.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import TextIO

import grpc

from chain.v1 import rpc_pb2
from node.cli.address import looks_like_http1
from node.cli.common import CliError, Context, dump_json, one_line, rpc_error_line, to_json
from node.cli.config import StoreError, default_home
from node.errors import CliCode, Reason
from node.sdk.git import GitError

EXIT_ERROR = 1
# A bare 20- or 32-byte hex value (an address, project id or hash) in a node's message: printed 0x-prefixed,
# as chainctl prints them everywhere else. Git ids (GIT_ERROR) are left as git prints them.
BARE_HEX_RE = re.compile(r"(?<![0-9A-Za-z])([0-9a-fA-F]{64}|[0-9a-fA-F]{40})(?![0-9A-Za-z])")
HINTS: Mapping[str, str] = MappingProxyType(
    {Reason.NO_STORAGE: "grant the account storage first: chainctl account fund ADDRESS --units N --authority FILE"}
)


def status(ctx: Context, args: argparse.Namespace) -> None:
    resp = ctx.client.stub.GetNodeStatus(rpc_pb2.GetNodeStatusRequest(), timeout=ctx.timeout)
    ctx.emit(to_json(resp.status))


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


def rpc_failure(ctx: Context, err: grpc.RpcError) -> tuple[str, str]:
    """A failed call's line; an address that answers HTTP/1.1 is named as the REST port it is."""
    details = err.details() if isinstance(err, grpc.Call) else ""
    if looks_like_http1(details or ""):
        return Reason.UNAVAILABLE, (
            f"{ctx.node} answers HTTP/1.1, not gRPC: that is a REST port (the gateway's or the node's web "
            "port); point --node at the node's gRPC port (default 50051)"
        )
    return rpc_error_line(err)


def execute(args: argparse.Namespace, node: str, out: TextIO, err: TextIO) -> int:
    ctx = Context(
        node=node,
        home=args.home.expanduser() if args.home is not None else default_home(),
        json=args.json,
        account_ref=args.account,
        timeout=args.timeout,
        out=out,
        err=err,
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
        return report(ctx, *rpc_failure(ctx, exc))
    except KeyboardInterrupt:
        return report(ctx, CliCode.INTERRUPTED, "interrupted")
    finally:
        ctx.close()
    return 0
