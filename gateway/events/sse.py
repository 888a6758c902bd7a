"""SSE handlers: GET /v1/events/messages and GET /v1/events/blocks.

A request is checked (filters, resume id, per-IP limit), subscribed to its hub before the response
headers go out (so a client that has the headers receives every later commit), then served: history
when it resumes from an older id, then its queue, with `: ping` comments while idle.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from contextlib import suppress
from dataclasses import dataclass

import grpc
from aiohttp import HttpVersion11, hdrs, web
from redis.exceptions import RedisError

from chain.v1 import message_pb2 as pb
from gateway.errors import ApiError, invalid_argument
from gateway.events.history import HistoryUnavailable
from gateway.events.hub import Batch, EndReason, Filter, Subscription
from gateway.events.model import PING, Event, EventKey, Kind, error_frame
from gateway.events.service import EventService
from gateway.keys import CLIENTS, EVENTS
from node.errors import Reason

log = logging.getLogger(__name__)

READY_WAIT = 5.0  # how long a request waits for a feed that has not started before answering 503
FINAL_WRITE = 1.0  # seconds allowed for the last frame to a client being cut off
SEND_BUFFER = 64 * 1024  # kernel send buffer of an SSE socket: the lag allowed beyond the queue stays small
RETRY_MS = 1_000  # reconnect delay suggested to EventSource clients


@dataclass(frozen=True)
class StreamRequest:
    wants: Filter
    after: EventKey | None  # resume after this key (exclusive); None: live only


def parse_types(values: list[str]) -> frozenset[int]:
    out: set[int] = set()
    for value in values:
        for name in (v.strip().upper() for v in value.split(",")):
            if not name:
                continue
            full = name if name.startswith("MESSAGE_TYPE_") else "MESSAGE_TYPE_" + name
            try:
                number = pb.MessageType.Value(full)
            except ValueError:
                raise invalid_argument("types", f"unknown message type {name!r}") from None
            if number == pb.MESSAGE_TYPE_UNSPECIFIED:
                raise invalid_argument("types", "MESSAGE_TYPE_UNSPECIFIED is not a message type")
            out.add(number)
    return frozenset(out)


def parse_project(value: str) -> bytes:
    if not value:
        return b""
    text = value[2:] if value[:2].lower() == "0x" else value
    try:
        raw = bytes.fromhex(text)
    except ValueError:
        raise invalid_argument("project_id", "project_id is not hex") from None
    if len(raw) != 32:
        raise invalid_argument("project_id", f"project_id has {len(raw)} bytes, expected 32")
    return raw


def parse_request(request: web.Request, kind: Kind) -> StreamRequest:
    q = request.query
    wants = Filter()
    if kind is Kind.MESSAGES:
        wants = Filter(parse_project(q.get("project_id", "")), parse_types(q.getall("types", [])))
    elif "project_id" in q or "types" in q:
        raise invalid_argument("project_id" if "project_id" in q else "types", "the blocks stream has no filters")
    after: EventKey | None = None
    resume = request.headers.get("Last-Event-ID", "").strip() or q.get("last_event_id", "").strip()
    if resume:
        try:
            after = EventKey.parse(resume)
        except ValueError as err:
            raise invalid_argument("last_event_id", str(err)) from None
    elif q.get("from_block"):
        text = q["from_block"]
        if not (text.isascii() and text.isdigit()) or int(text) < 1 or int(text) >= 2**64:
            raise invalid_argument("from_block", "from_block is a block number (1 or more)")
        after = EventKey.after_block(int(text) - 1)
    return StreamRequest(wants, after)


async def messages_handler(request: web.Request) -> web.StreamResponse:
    return await _serve(request, Kind.MESSAGES)


async def blocks_handler(request: web.Request) -> web.StreamResponse:
    return await _serve(request, Kind.BLOCKS)


async def _serve(request: web.Request, kind: Kind) -> web.StreamResponse:
    service = request.app[EVENTS]
    params = parse_request(request, kind)
    ip = request.app[CLIENTS].of(request)  # the peer, or the client a trusted proxy names
    if not service.limiter.acquire(ip):
        limit = service.limiter.limit
        raise ApiError(429, Reason.RESOURCE_EXHAUSTED, f"at most {limit} open event streams per client address")
    try:
        hub = service.hubs[kind]
        if not hub.ready.is_set():
            with suppress(TimeoutError):
                await asyncio.wait_for(hub.ready.wait(), READY_WAIT)
            if not hub.ready.is_set():
                raise ApiError(503, Reason.UNAVAILABLE, "the event source is not reachable yet; retry")
        if hub.closed:
            raise ApiError(503, Reason.UNAVAILABLE, "the gateway is shutting down")
        sub = hub.subscribe(params.wants)
        try:
            return await _Stream(request, service, kind, params, sub).run()
        finally:
            hub.unsubscribe(sub)
    finally:
        service.limiter.release(ip)


class _Stream:
    """One client's stream; writes are tracked so that ending a subscription can unblock a stalled write."""

    def __init__(
        self, request: web.Request, service: EventService, kind: Kind, params: StreamRequest, sub: Subscription
    ) -> None:
        self.request = request
        self.service = service
        self.kind = kind
        self.params = params
        self.sub = sub
        self.response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
        )
        self.chunked = request.version >= HttpVersion11
        if self.chunked:
            self.response.enable_chunked_encoding()  # explicit: the sink writes whole chunks itself
        self.writing = False
        self.aborted = False
        self.last_sent = 0.0  # loop time of the last write (events or ping)
        self.unsent = 0  # events the sink wrote that may still wait in the connection's buffer
        self.final_sent = False
        self.position = params.after or EventKey(0, 0)  # the last key handled (delivered or filtered out)
        self.delivered: EventKey | None = None  # the last key sent to the client
        self.loop = asyncio.get_running_loop()
        self.transport: asyncio.Transport | None = None
        self.max_lag = service.config.sse_queue
        self.max_buffer = service.config.sse_max_buffer
        sub.on_end = self._on_end

    async def run(self) -> web.StreamResponse:
        await self.response.prepare(self.request)
        if self.request.method == hdrs.METH_HEAD:  # the GET's status and headers; a stream has no end to wait for
            await self.response.write_eof()
            return self.response
        self.transport = self.request.transport  # the sink's, looked up once (closing once the client is gone)
        self._small_send_buffer()
        try:
            await self._write(f"retry: {RETRY_MS}\n\n".encode())
            after = self.params.after
            # Live events only after the whole history: a client never sees an id past a missing event.
            if after is None or after >= self.sub.boundary or await self._history(after):
                await self._live()
            ended = self.sub.ended
            if ended is EndReason.SHUTDOWN:
                await self._final(self._shutdown_frame())
            elif ended is not None:
                await self._final(self._end_frame(ended))
            if not self.aborted:
                try:
                    async with asyncio.timeout(FINAL_WRITE):
                        await self.response.write_eof()
                except TimeoutError:
                    self._abort()
        except ConnectionError:
            pass  # the client went away, or was cut off
        return self.response

    async def _history(self, after: EventKey) -> bool:
        """Send the events in (after, boundary]; True when all were sent (False: the stream ends)."""
        try:
            async for page in self.service.history.pages(self.kind, after, self.sub.boundary):
                if self.sub.ended is not None:
                    break
                frames: list[bytes] = []
                for event in page:
                    if event.key <= self.position:
                        continue
                    self.position = event.key
                    if self.params.wants(event):
                        frames.append(event.frame)
                        self.delivered = event.key
                if frames:
                    await self._write(b"".join(frames))
        except (grpc.aio.AioRpcError, RedisError, HistoryUnavailable) as err:
            log.warning("history for %s after %s: %r", self.kind.value, after, err)
            message = "history is not available now; reconnect with Last-Event-ID"
            await self._final(error_frame(Reason.UNAVAILABLE, message, reason=Reason.HISTORY_UNAVAILABLE, **self._at()))
            return False
        if self.sub.ended is not None:
            return False
        self.position = max(self.position, self.sub.boundary)
        return True

    async def _live(self) -> None:
        queue = self.sub.queue
        heartbeat = self.service.config.sse_heartbeat
        loop = asyncio.get_running_loop()
        while True:
            item: Event | None
            if queue.empty() and self.sub.sink is None and self.sub.ended is None and not self.aborted:
                # Caught up: from here the hub hands events straight to `_sink`; the queue only ever
                # receives the end marker. (No await between the check and this line: nothing slips in.)
                self.sub.sink = self._sink
            if queue.empty():
                idle = loop.time() - self.last_sent  # the sink writes without waking this task
                try:
                    async with asyncio.timeout(max(0.0, heartbeat - idle)):
                        item = await queue.get()
                except TimeoutError:
                    if loop.time() - self.last_sent >= heartbeat:
                        await self._write(PING)
                    continue
            else:
                item = queue.get_nowait()
            frames: list[bytes] = []
            while item is not None:
                if item.key > self.position:
                    self.position = item.key
                    frames.append(item.frame)
                    self.delivered = item.key
                if queue.empty() or len(frames) >= 256:
                    break
                item = queue.get_nowait()
            if frames:
                await self._write(b"".join(frames))
            if item is None:
                return

    async def _write(self, data: bytes) -> None:
        self.writing = True
        try:
            await self.response.write(data)
            self.last_sent = asyncio.get_running_loop().time()
        finally:
            self.writing = False

    def _sink(self, events: Batch) -> bool:
        """Events from the hub, written to the connection without waiting (whole chunks of the chunked
        response, so they interleave safely with aiohttp's own writes); False when the client is more
        than --sse-max-buffer-bytes behind, or gone. The batch's bytes are shared with every client owed
        the same events (hub.py: encoded once)."""
        transport = self.transport
        if transport is None or transport.is_closing():
            return False
        if events[0].key <= self.position:  # some were sent already (not on the hub's path; kept exact)
            events = Batch(e for e in events if e.key > self.position)
            if not events:
                return True
        self.position = self.delivered = events[-1].key
        if transport.get_write_buffer_size() == 0:
            self.unsent = 0  # everything written so far has reached the kernel
        transport.write(events.chunks if self.chunked else events.frames)
        self.last_sent = self.loop.time()
        buffered = transport.get_write_buffer_size()
        if buffered:
            self.unsent += len(events)  # at most this many events wait in the connection's buffer
        return self.unsent <= self.max_lag and buffered <= self.max_buffer

    async def _final(self, frame: bytes) -> None:
        """The last frame to a client (once); one that does not take it in time is cut off."""
        if self.aborted or self.final_sent:
            return
        self.final_sent = True
        try:
            async with asyncio.timeout(FINAL_WRITE):
                await self.response.write(frame)
        except TimeoutError:
            self._abort()

    def _end_frame(self, reason: EndReason) -> bytes:
        if reason is EndReason.SLOW:
            queue = self.service.config.sse_queue
            return error_frame(
                Reason.RESOURCE_EXHAUSTED,
                f"the client fell more than {queue} events behind; reconnect with Last-Event-ID",
                reason=Reason.SLOW_SUBSCRIBER,
                **self._at(),
            )
        message = "the gateway's event source skipped events; reconnect with Last-Event-ID"
        return error_frame(Reason.UNAVAILABLE, message, reason=Reason.STREAM_GAP, **self._at())

    def _shutdown_frame(self) -> bytes:
        """The gateway stops (SIGTERM: scale-in, a rollout): no event, only what EventSource keeps for its
        reconnect, which another gateway behind the Service answers: the last id sent on this stream (the one
        it already has; nothing when it sent none) and the retry delay."""
        lines = [": the gateway is shutting down; reconnect with Last-Event-ID"]
        if self.delivered is not None:
            lines.append(f"id: {self.delivered}")
        lines.append(f"retry: {RETRY_MS}")
        return ("\n".join(lines) + "\n\n").encode()

    def _at(self) -> dict[str, str]:
        return {"last_event_id": str(self.delivered)} if self.delivered is not None else {}

    def _on_end(self, reason: EndReason) -> None:
        # Blocked on a client that does not read (a write in progress, or, once the hub writes for us,
        # data still waiting in the connection's buffer): cut it off now.
        transport = self.request.transport
        backed_up = self.sub.sink is not None and transport is not None and transport.get_write_buffer_size() > 0
        if self.writing or backed_up:
            self._abort()

    def _abort(self) -> None:
        self.aborted = True
        transport = self.request.transport
        if transport is not None:
            transport.abort()

    def _small_send_buffer(self) -> None:
        transport = self.request.transport
        sock = transport.get_extra_info("socket") if transport is not None else None
        if sock is not None:
            with suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER)
