"""The relay: node streams into Redis Streams, with the explicit id `<block>-<index>`.

Every gateway with Redis runs one relay per kind. Each resumes after the stream's last entry (or, on an
empty stream, after the origin block the first relay recorded), so every relay writes the same contiguous
sequence of events; Redis refuses an id that is not larger than the last, so whichever relay is first
writes an event and the others' copies are refused ("already written", counted, not an error).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import grpc
from redis.exceptions import RedisError

from gateway.events.backoff import Backoff
from gateway.events.feeds import draining, event_of, node_head, open_node_stream
from gateway.events.model import Event, Kind
from gateway.events.redis_streams import RedisStreams, stream_name
from gateway.upstream import NodePool

log = logging.getLogger(__name__)

BATCH = 500  # events per Redis round trip (one pipeline of XADDs)


class Relay:
    def __init__(self, kind: Kind, pool: NodePool, streams: RedisStreams) -> None:
        self.kind = kind
        self.pool = pool
        self.streams = streams
        self.written = 0
        self.duplicates = 0
        self.skipped = 0
        self.backoff = Backoff()
        self.stopping = False
        self.on_append: Callable[[list[Event], int], None] | None = None  # metrics (gateway/telemetry.py)

    async def run(self) -> None:
        while not self.stopping:
            try:
                await self.follow()
            except asyncio.CancelledError:
                raise
            except Exception as err:
                errors = err.exceptions if isinstance(err, ExceptionGroup) else (err,)
                if any(draining(e) for e in errors):  # the node shuts down: resume on the next node now
                    log.info("relay to %s: the node is draining; resuming on another node", stream_name(self.kind))
                    self.backoff.reset()
                    continue
                for e in errors:
                    if isinstance(e, grpc.aio.AioRpcError | RedisError | OSError):
                        detail = f"{e.code().name}: {e.details()}" if isinstance(e, grpc.aio.AioRpcError) else repr(e)
                        log.warning("relay to %s: %s; reconnecting", stream_name(self.kind), detail)
                    else:
                        log.error("relay to %s failed; reconnecting", stream_name(self.kind), exc_info=e)
            await self.backoff.wait()

    async def follow(self) -> None:
        await self.pool.wait_until_up()  # a gateway started before its node waits quietly (gateway/upstream/pool.py)
        upstream = self.pool.pick()
        last = await self.streams.last(self.kind)
        if last is not None:
            call = open_node_stream(
                upstream, self.kind, after_event_id=last.event_id, after_block=last.key.block, timeout=self.pool.timeout
            )
        else:
            origin = await self.streams.origin(self.kind)
            if origin is None:
                origin = await self.streams.claim_origin(self.kind, await node_head(upstream, self.pool.timeout))
            call = open_node_stream(upstream, self.kind, from_block=origin + 1, timeout=self.pool.timeout)
        log.info(
            "relay %s -> %s from %s",
            upstream.address, stream_name(self.kind), f"event {last.event_id}" if last else "the origin",
        )  # fmt: skip
        queue: asyncio.Queue[Event | None] = asyncio.Queue(maxsize=2 * BATCH)
        try:
            async with asyncio.TaskGroup() as tasks:
                tasks.create_task(self._read(call, queue))
                tasks.create_task(self._write(queue))
        finally:
            call.cancel()

    async def _read(self, call: Any, queue: asyncio.Queue[Event | None]) -> None:
        async for response in call:
            try:
                event = event_of(self.kind, response)
            except Exception:
                self.skipped += 1
                log.exception("relay %s: cannot read event %d; skipped", self.kind.value, response.event_id)
                continue
            await queue.put(event)
        await queue.put(None)  # the node ended the stream (shutting down): reconnect

    async def _write(self, queue: asyncio.Queue[Event | None]) -> None:
        while True:
            item = await queue.get()
            batch: list[Event] = []
            while item is not None:
                batch.append(item)
                if len(batch) >= BATCH or queue.empty():
                    break
                item = queue.get_nowait()
            if batch:
                written = await self.streams.append(batch)
                if self.on_append is not None:
                    self.on_append(batch, written)
                self.written += written
                self.duplicates += len(batch) - written
                self.backoff.reset()
            if item is None:
                return
