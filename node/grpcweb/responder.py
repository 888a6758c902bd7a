"""The HTTP side of one gRPC-web call: how its outcome is written back, whoever produced it.

    out = Responder(request, mode, content_type, "/pkg.Service/Method", cors, allowed_origin)
    return out.unary(payload, RpcStatus(grpc.StatusCode.OK))            # one body: data + trailers frame
    return out.trailers_only(RpcStatus(code, message, trailing))         # status in the headers, no body
    await out.send_payload(frame_payload); return await out.finish(status)   # a stream

Used by the node's own gRPC-web endpoint (`node.grpcweb.server`, in-process servicers) and by the gateway's
bridge onto native gRPC (`gateway.rest.grpcweb_bridge`), so both write the same frames, trailers and
trailers-only answers (the wire format is `node.grpcweb.wire`). CORS headers are added when a policy and
an allowed origin are given; a host that adds them itself (the gateway) passes neither.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import grpc
import grpc.aio
from aiohttp import web
from multidict import CIMultiDict

from node.grpcweb.cors import CorsPolicy
from node.grpcweb.wire import (
    DATA_FLAG,
    TRAILERS_FLAG,
    HeaderLine,
    Metadata,
    Mode,
    encode_frame,
    encode_trailers,
    metadata_to_headers,
    status_lines,
)

log = logging.getLogger("chain.grpcweb")


@dataclass(frozen=True)
class RpcStatus:
    code: grpc.StatusCode
    message: str = ""
    trailing_metadata: Metadata = ()


# The status a call ended with, kept on its request for middlewares (the node's RPC metrics).
STATUS_KEY: web.RequestKey[RpcStatus] = web.RequestKey("grpc_web_status", RpcStatus)


class ClientGone(Exception):
    """Writing to the client failed: it disconnected."""


class Responder:
    """Writes one call's response: trailers-only, a single unary body, or a chunked stream of frames.

    Headers go out with the first message or on `send_initial_metadata`, as on native gRPC; a call that
    ends before either answers trailers-only (status in the HTTP headers, empty body).
    """

    def __init__(
        self,
        request: web.Request,
        mode: Mode,
        content_type: str,
        method: str,
        cors: CorsPolicy | None = None,
        allowed_origin: str | None = None,
    ) -> None:
        self._request = request
        self._mode = mode
        self._content_type = content_type
        self._cors = cors
        self._allowed_origin = allowed_origin
        self._method = method
        self.serializer: Callable[[Any], bytes] | None = None
        self._stream: web.StreamResponse | None = None
        self._finished = False

    @property
    def started(self) -> bool:
        return self._stream is not None

    def serialize(self, message: Any) -> bytes:
        return self.serializer(message) if self.serializer is not None else bytes(message)

    def _metadata_lines(self, metadata: Metadata) -> list[HeaderLine]:
        lines, rejected = metadata_to_headers(metadata)
        if rejected:
            log.warning("%s: dropped invalid or reserved metadata keys %s", self._method, rejected)
        return lines

    def _headers(self, lines: Sequence[HeaderLine], status: Sequence[HeaderLine] = ()) -> CIMultiDict[str]:
        headers: CIMultiDict[str] = CIMultiDict()
        headers["Content-Type"] = self._content_type
        for line in (*status, *lines):
            headers.add(line.name, line.value)
        if self._cors is not None and self._allowed_origin is not None:
            headers.update(self._cors.response_headers(self._allowed_origin, [line.name for line in lines]))
        return headers

    async def send_initial_metadata(self, metadata: Metadata) -> None:
        if self._stream is not None:
            raise grpc.aio.UsageError("initial metadata was already sent")
        await self._start(metadata)

    async def _start(self, metadata: Metadata) -> web.StreamResponse:
        stream = web.StreamResponse(status=200, headers=self._headers(self._metadata_lines(metadata)))
        self._stream = stream
        try:
            await stream.prepare(self._request)
        except ConnectionError as exc:
            raise ClientGone() from exc
        return stream

    async def send_message(self, message: Any) -> None:
        if self._finished:
            raise grpc.aio.UsageError("the call has finished")
        await self.send_payload(self.serialize(message))

    async def send_payload(self, payload: bytes) -> None:
        """One data frame, flushed now (each streamed message reaches the client as it is produced)."""
        stream = self._stream or await self._start(())
        try:
            await stream.write(self._data_frame(payload))
        except ConnectionError as exc:
            raise ClientGone() from exc

    def abandon(self) -> web.StreamResponse:
        """What to hand aiohttp once the client is gone: nothing more will be written."""
        self._finished = True
        if self._stream is not None:
            return self._stream
        response = web.Response(status=499)
        response.force_close()
        return response

    def trailers_only(self, status: RpcStatus) -> web.Response:
        self._finished = True
        self._request[STATUS_KEY] = status
        lines = self._metadata_lines(status.trailing_metadata)
        headers = self._headers(lines, status_lines(status.code, status.message))
        return web.Response(status=200, headers=headers, body=b"")

    def unary(self, payload: bytes, status: RpcStatus) -> web.Response:
        """A complete unary answer in one body (with a Content-Length), when nothing was sent yet."""
        self._finished = True
        self._request[STATUS_KEY] = status
        trailer = self._trailer_frame(status)
        return web.Response(status=200, headers=self._headers(()), body=self._data_frame(payload) + trailer)

    async def finish(self, status: RpcStatus) -> web.StreamResponse:
        if self._stream is None:
            return self.trailers_only(status)
        self._finished = True
        self._request[STATUS_KEY] = status
        try:
            await self._stream.write(self._trailer_frame(status))
            await self._stream.write_eof()
        except ConnectionError as exc:
            raise ClientGone() from exc
        return self._stream

    def _data_frame(self, payload: bytes) -> bytes:
        return encode_frame(DATA_FLAG, payload, self._mode)

    def _trailer_frame(self, status: RpcStatus) -> bytes:
        lines = status_lines(status.code, status.message) + self._metadata_lines(status.trailing_metadata)
        return encode_frame(TRAILERS_FLAG, encode_trailers(lines), self._mode)
