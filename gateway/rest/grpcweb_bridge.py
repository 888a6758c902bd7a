"""gRPC-web onto native gRPC: the passthrough when the gateway has no `--node-web-url`.

The request's one gRPC-web message (binary or text mode) is sent as it is, as bytes, over the gateway's own
gRPC channel to a node of the pool (`--node-addr`, round robin); the answer's messages come back as gRPC-web
data frames as the node produces them, and the status with the node's trailing metadata (`reason-code`
included) as the trailers frame. Whether a method streams is read from the descriptors of the public
services (`chain.v1` and server reflection v1/v1alpha). Reflection is bidirectional: its request body may
hold several messages, sent as the client stream (half-duplex: HTTP/1.1 delivers the body whole). Nothing
is decoded: the framing, text mode, timeouts and metadata rules are the node's own gRPC-web wire code
(`node.grpcweb.wire`), and the answer is written by the node's own `node.grpcweb.responder.Responder`
(data frames, trailers frame, trailers-only), so both paths answer alike. CORS is the gateway's
(`gateway.rest.cors`, the same rule as the node's). The members' own metadata (`chain-member-proof`) is never
sent on (gateway/internal.py). Writes are not retried (see `gateway.upstream`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import grpc
from aiohttp import web
from google.protobuf import descriptor_pool
from grpc_reflection.v1alpha import reflection_pb2

import chain.v1.keychain_service_pb2
import chain.v1.service_pb2
from gateway.internal import is_internal
from gateway.keys import CONFIG, NODES
from node.grpcweb.responder import ClientGone, Responder, RpcStatus
from node.grpcweb.server import DEFAULT_MAX_MESSAGE_SIZE
from node.grpcweb.wire import (
    Metadata,
    Mode,
    ProtocolError,
    headers_to_metadata,
    parse_timeout,
    printable,
    request_message,
    request_messages,
    valid_metadata_key,
)
from node.server.reflection import V1_FILE, describe_v1

# The public services a request may name: the chain's (not AdminService) and server reflection (both versions).
SERVICES = frozenset(
    d.name
    for d in (chain.v1.service_pb2.DESCRIPTOR, chain.v1.keychain_service_pb2.DESCRIPTOR, reflection_pb2.DESCRIPTOR)
) | {V1_FILE}
# What a browser sends that is no metadata for the node (besides the wire code's own list).
NOT_FORWARDED = frozenset({"user-agent", "origin", "referer", "cookie", "authorization"})


@dataclass(frozen=True)
class Shape:
    """How a method streams: a client stream is sent half-duplex (every message of the request body)."""

    client_streaming: bool
    server_streaming: bool


def method_shape(service: str, method: str) -> Shape | None:
    """How `service/method` streams; None when the gateway offers no such method."""
    describe_v1()
    try:
        found = descriptor_pool.Default().FindServiceByName(service)
    except KeyError:
        return None
    if found.file.name not in SERVICES:
        return None
    m = found.methods_by_name.get(method)
    if m is None:
        return None
    return Shape(bool(m.client_streaming), bool(m.server_streaming))


def _status(code: grpc.StatusCode, message: str, metadata: Iterable[Any] | None) -> RpcStatus:
    """A call's end as the responder writes it; grpc.aio's metadata entries as plain (key, value) pairs."""
    return RpcStatus(code, message, tuple((str(k), v) for k, v in metadata or ()))


def _outgoing(headers: Sequence[tuple[str, str]]) -> Metadata:
    """The request's headers that are metadata for the node, as gRPC accepts them (others are dropped, and so
    is the members' own metadata, gateway/internal.py)."""
    return tuple(
        (m.key, m.value)
        for m in headers_to_metadata(headers)
        if m.key not in NOT_FORWARDED
        and not is_internal(m.key)
        and not m.key.startswith(("sec-", "access-control-", "grpc-"))
        and valid_metadata_key(m.key)
        and (isinstance(m.value, bytes) or printable(m.value))
    )


async def bridge(request: web.Request, mode: Mode, content_type: str) -> web.StreamResponse:
    service, name = request.match_info["service"], request.match_info["method"]
    path = f"/{service}/{name}"
    out = Responder(request, mode, content_type, path)
    shape = method_shape(service, name)
    if shape is None:
        return out.trailers_only(RpcStatus(grpc.StatusCode.UNIMPLEMENTED, f"Method not found: {path}"))
    streaming = shape.server_streaming or shape.client_streaming
    timeout = request.app[CONFIG].request_timeout if not streaming else None
    try:
        if "grpc-timeout" in request.headers:
            timeout = parse_timeout(request.headers["grpc-timeout"])
        body = await request.read()
        # The node's own gRPC-web limit, so a short or oversize frame gets the node's answer.
        if shape.client_streaming:
            payloads = request_messages(body, mode, DEFAULT_MAX_MESSAGE_SIZE)
        else:
            payloads = [request_message(body, mode, DEFAULT_MAX_MESSAGE_SIZE)]
    except ProtocolError as err:
        return out.trailers_only(RpcStatus(err.code, err.message))
    except ValueError as err:
        return out.trailers_only(RpcStatus(grpc.StatusCode.INVALID_ARGUMENT, str(err)))
    metadata = _outgoing(list(request.headers.items()))
    channel = request.app[NODES].pick().channel
    if not streaming:
        call = channel.unary_unary(path, request_serializer=None, response_deserializer=None)(
            payloads[0], metadata=metadata, timeout=timeout
        )
        try:
            reply = await call
            trailing = await call.trailing_metadata()
        except grpc.aio.AioRpcError as err:
            return out.trailers_only(_status(err.code(), err.details() or "", err.trailing_metadata()))
        return out.unary(reply, _status(grpc.StatusCode.OK, "", trailing))
    stream: Any
    if shape.client_streaming:
        stream = channel.stream_stream(path, request_serializer=None, response_deserializer=None)(
            iter(payloads), metadata=metadata, timeout=timeout
        )
    else:
        stream = channel.unary_stream(path, request_serializer=None, response_deserializer=None)(
            payloads[0], metadata=metadata, timeout=timeout
        )
    return await _relay(stream, out)


async def _relay(stream: Any, out: Responder) -> web.StreamResponse:
    """A streaming call's answers as data frames, then its status as the trailers frame."""
    try:
        await out.send_initial_metadata(())  # headers at once: the browser sees the stream is up
        try:
            async for message in stream:
                await out.send_payload(message)
            end = _status(grpc.StatusCode.OK, "", await stream.trailing_metadata())
        except grpc.aio.AioRpcError as err:
            end = _status(err.code(), err.details() or "", err.trailing_metadata())
        return await out.finish(end)
    except ClientGone:
        return out.abandon()  # the client left
    finally:
        stream.cancel()  # a no-op when it ended; stops the node's side when the client left or we were cancelled
