"""gRPC-web onto native gRPC: the passthrough when the gateway has no `--node-web-url`.

The request's one gRPC-web message (binary or text mode) is sent as it is, as bytes, over the gateway's own
gRPC channel to a node of the pool (`--node-addr`, round robin); the answer's messages come back as gRPC-web
data frames as the node produces them, and the status with the node's trailing metadata (`reason-code`
included) as the trailers frame. Whether a method streams is read from the `chain.v1` descriptors. Nothing
is decoded: the framing, text mode, timeouts and metadata rules are the node's own gRPC-web wire code
(`node.grpcweb.wire`), so both paths answer alike. Writes are not retried (see `gateway.nodes`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

import grpc
from aiohttp import web
from google.protobuf import descriptor_pool

import chain.v1.keychain_service_pb2
import chain.v1.service_pb2
from gateway.errors import ApiError
from gateway.keys import CONFIG, NODES
from node.grpcweb.wire import (
    DATA_FLAG,
    TRAILERS_FLAG,
    Mode,
    ProtocolError,
    decode_text_body,
    encode_frame,
    encode_trailers,
    headers_to_metadata,
    metadata_to_headers,
    parse_content_type,
    parse_timeout,
    single_request_message,
    status_lines,
)

Metadata = Iterable[tuple[str, str | bytes]]
SERVICES = frozenset(d.name for d in (chain.v1.service_pb2.DESCRIPTOR, chain.v1.keychain_service_pb2.DESCRIPTOR))
# What a browser sends that is no metadata for the node (besides the wire code's own list).
NOT_FORWARDED = frozenset({"user-agent", "origin", "referer", "cookie", "authorization"})
METADATA_KEY = re.compile(r"^[0-9a-z_.\-]+$")
PRINTABLE = re.compile(r"^[\x20-\x7e]*$")


def server_streaming(service: str, method: str) -> bool | None:
    """Whether `service/method` streams its answer; None when no such unary or server-streaming method."""
    try:
        found = descriptor_pool.Default().FindServiceByName(service)
    except KeyError:
        return None
    if found.file.name not in SERVICES:
        return None  # only the chain's public services (not AdminService)
    m = found.methods_by_name.get(method)
    if m is None or m.client_streaming:
        return None
    return bool(m.server_streaming)


class _Answer:
    def __init__(self, mode: Mode, content_type: str) -> None:
        self.mode = mode
        self.content_type = content_type

    def data(self, payload: bytes) -> bytes:
        return encode_frame(DATA_FLAG, payload, self.mode)

    def trailers(self, code: grpc.StatusCode, message: str, metadata: Metadata = ()) -> bytes:
        lines = status_lines(code, message) + metadata_to_headers(metadata)[0]
        return encode_frame(TRAILERS_FLAG, encode_trailers(lines), self.mode)

    def trailers_only(self, code: grpc.StatusCode, message: str, metadata: Metadata = ()) -> web.Response:
        """The whole answer in headers (gRPC-web's trailers-only form): nothing was produced."""
        response = web.Response(status=200, body=b"", headers={"Content-Type": self.content_type})
        for line in status_lines(code, message) + metadata_to_headers(metadata)[0]:
            response.headers.add(line.name, line.value)
        return response


def _pairs(metadata: Iterable[Any] | None) -> Metadata:
    """grpc.aio's metadata entries as plain (key, value) pairs."""
    return [(str(k), v) for k, v in metadata or ()]


def _outgoing(headers: Sequence[tuple[str, str]]) -> tuple[tuple[str, str | bytes], ...]:
    """The request's headers that are metadata for the node, as gRPC accepts them (others are dropped)."""
    return tuple(
        (m.key, m.value)
        for m in headers_to_metadata(headers)
        if m.key not in NOT_FORWARDED
        and not m.key.startswith(("sec-", "access-control-", "grpc-"))
        and METADATA_KEY.match(m.key)
        and (isinstance(m.value, bytes) or PRINTABLE.match(m.value))
    )


async def bridge(request: web.Request) -> web.StreamResponse:
    parsed = parse_content_type(request.headers.get("Content-Type"))
    if parsed is None:
        accepted = ["application/grpc-web+proto", "application/grpc-web-text+proto"]
        raise ApiError(415, "UNSUPPORTED_MEDIA_TYPE", "not a gRPC-web content type", accepted=accepted)
    out = _Answer(*parsed)
    service, name = request.match_info["service"], request.match_info["method"]
    streaming = server_streaming(service, name)
    if streaming is None:
        return out.trailers_only(grpc.StatusCode.UNIMPLEMENTED, f"Method not found: /{service}/{name}")
    timeout = request.app[CONFIG].request_timeout if not streaming else None
    try:
        if "grpc-timeout" in request.headers:
            timeout = parse_timeout(request.headers["grpc-timeout"])
        body = await request.read()
        payload = single_request_message(decode_text_body(body) if out.mode is Mode.TEXT else body, len(body))
    except ProtocolError as err:
        return out.trailers_only(err.code, err.message)
    except ValueError as err:
        return out.trailers_only(grpc.StatusCode.INVALID_ARGUMENT, str(err))
    metadata = _outgoing(list(request.headers.items()))
    channel = request.app[NODES].pick().channel
    path = f"/{service}/{name}"
    if not streaming:
        call = channel.unary_unary(path, request_serializer=None, response_deserializer=None)(
            payload, metadata=metadata, timeout=timeout
        )
        try:
            reply = await call
            trailing = await call.trailing_metadata()
        except grpc.aio.AioRpcError as err:
            return out.trailers_only(err.code(), err.details() or "", _pairs(err.trailing_metadata()))
        body = out.data(reply) + out.trailers(grpc.StatusCode.OK, "", _pairs(trailing))
        return web.Response(status=200, body=body, headers={"Content-Type": out.content_type})
    stream = channel.unary_stream(path, request_serializer=None, response_deserializer=None)(
        payload, metadata=metadata, timeout=timeout
    )
    response = web.StreamResponse(status=200, headers={"Content-Type": out.content_type})
    try:
        await response.prepare(request)
        try:
            async for message in stream:
                await response.write(out.data(message))
            end = out.trailers(grpc.StatusCode.OK, "", _pairs(await stream.trailing_metadata()))
        except grpc.aio.AioRpcError as err:
            end = out.trailers(err.code(), err.details() or "", _pairs(err.trailing_metadata()))
        await response.write(end)
        await response.write_eof()
    except ConnectionError:
        pass  # the client left
    finally:
        stream.cancel()  # a no-op when it ended; stops the node's side when the client left or we were cancelled
    return response
