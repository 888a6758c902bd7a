"""What a chainctl command needs once it talks to a node: the client, the node's network, name lookups,
submitting and waiting, and a failed call as one line.

Loaded through ``node.entry.lazy`` by ``node.cli.common.Context`` the first time a command reaches the node
(it imports grpc and protobuf), so the offline commands never load it.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Sequence

import grpc

from chain.v1 import block_pb2, rpc_pb2
from chain.v1 import message_pb2 as pb
from node.cli.address import looks_like_http1
from node.cli.common import CliError, Context, one_line
from node.cli.protojson import to_json
from node.errors import REASON_CODE, CliCode, Reason, trailer
from node.sdk.keys import Ed25519Key
from node.sdk.messages import MessageBuilder
from node.sdk.rpc import ChainClient, Dropped, reason_of, tls_problem

DROPPED_RE = re.compile(r"dropped at block \d+: ([A-Z_]+)\s*(.*)$")


def connect(ctx: Context) -> ChainClient:
    def retrying(err: grpc.RpcError, wait: float) -> None:
        reason, text = rpc_error_line(err, ctx.node)
        ctx.note(f"{reason}: {text}; sending again in {wait:.1f} s")

    return ChainClient(
        ctx.node, timeout=ctx.timeout, retry_seconds=ctx.retry_seconds, on_retry=retrying, ca_file=ctx.ca_file
    )


def network(ctx: Context) -> pb.Network.ValueType:
    status = ctx.client.stub.GetNodeStatus(rpc_pb2.GetNodeStatusRequest(), timeout=ctx.timeout).status
    name = f"NETWORK_{status.network.upper()}"
    if name not in pb.Network.keys():  # noqa: SIM118 - an EnumTypeWrapper, not a dict
        raise CliError(CliCode.WRONG_NETWORK, f"node reports unknown network {status.network!r}")
    return pb.Network.Value(name)


def builder(ctx: Context, owner: bytes, signer: Ed25519Key) -> MessageBuilder:
    return MessageBuilder(owner, signer, network=ctx.network())


def project_by_name(ctx: Context, owner: bytes, name: str) -> bytes:
    req = rpc_pb2.GetProjectByNameRequest(owner_address=owner, name=name)
    return bytes(ctx.client.stub.GetProjectByName(req, timeout=ctx.timeout).project.project_id)


def submit(ctx: Context, msgs: Sequence[pb.Message], wait_for_commit: bool) -> list[block_pb2.CommittedMessage]:
    results = ctx.client.batch(msgs)
    for r in results:
        if not r.accepted:
            raise CliError(r.reason_code or CliCode.REJECTED, r.detail or "message rejected")
    if not wait_for_commit:
        return []
    return [ctx.wait(bytes(r.hash)) for r in results]


def wait(ctx: Context, message_hash: bytes, timeout: float) -> block_pb2.CommittedMessage:
    try:
        return ctx.client.wait_committed(message_hash, timeout=timeout)
    except (Dropped, TimeoutError) as exc:
        raise commit_failure(exc) from None


def commit_failure(exc: Dropped | TimeoutError) -> CliError:
    """A message that did not commit, as chainctl reports it (the drop reason when the node gave one)."""
    if isinstance(exc, TimeoutError):
        return CliError(CliCode.TIMEOUT, str(exc))
    text = str(exc)
    match = DROPPED_RE.search(text)
    if match:
        return CliError(match.group(1), f"dropped at commit: {match.group(2) or text}")
    return CliError(CliCode.DROPPED, text)


def rpc_error_line(err: grpc.RpcError, target: str = "") -> tuple[str, str]:
    """(reason code, one-line explanation) of a failed call."""
    reason = reason_of(err)
    details = err.details() if isinstance(err, grpc.Call) else ""
    text = one_line(details or "").removeprefix(f"{reason}: ")
    refused = isinstance(err, grpc.Call) and trailer(err.trailing_metadata(), REASON_CODE) is not None
    if isinstance(err, grpc.Call) and err.code() == grpc.StatusCode.UNAVAILABLE and not refused:
        text = unreachable(text, target)  # the node said nothing
    return reason, text or "request failed"


def unreachable(details: str, target: str) -> str:
    """A call the node never answered, said once: gRPC's ``failed to connect to all addresses; last error:
    UNKNOWN: ipv4:127.0.0.1:1: Failed to connect to remote host: Connection refused`` becomes ``cannot reach
    the node at TARGET: connection refused`` (the last clause is the cause; the rest repeats it)."""
    where = f" at {target}" if target else ""
    cause = details.rsplit(": ", 1)[-1].strip(" []()")
    return f"cannot reach the node{where}: {cause[:1].lower()}{cause[1:]}" if cause else f"cannot reach the node{where}"


def rpc_failure(ctx: Context, err: grpc.RpcError) -> tuple[str, str]:
    """A failed call's line; a failed TLS handshake names the target and the CA, and an address that answers
    HTTP/1.1 is named as the REST port it is."""
    if ctx.has_client:
        problem = tls_problem(err, ctx.client.target, ctx.client.tls)
        if problem is not None:
            return CliCode.TLS_FAILED, problem
    details = err.details() if isinstance(err, grpc.Call) else ""
    if looks_like_http1(details or ""):
        return Reason.UNAVAILABLE, (
            f"{ctx.node} answers HTTP/1.1, not gRPC: that is a REST port (the gateway's or the node's web "
            "port); point --node at the node's gRPC port (default 50051)"
        )
    return rpc_error_line(err, ctx.node)


def status(ctx: Context, args: argparse.Namespace) -> None:
    """``chainctl status``: the node's GetNodeStatus."""
    resp = ctx.client.stub.GetNodeStatus(rpc_pb2.GetNodeStatusRequest(), timeout=ctx.timeout)
    ctx.emit(to_json(resp.status))
