"""The one subscriber per kind and process that feeds a hub: from the node (no Redis) or from Redis.

Both follow their source forever: on a failure they log, wait (backoff) and resume after the last event
they published, so the hub sees every event once and in order. An event id that skips ahead (a source that
lost events, e.g. Redis entries trimmed while this gateway was away) resets the hub: its clients are told
to resume with their Last-Event-ID and get the missing events as history.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import grpc
from redis.exceptions import RedisError

from chain.v1 import rpc_pb2
from gateway.events.backoff import Backoff
from gateway.events.hub import Hub
from gateway.events.model import Event, Kind, start_position
from gateway.events.redis_streams import RedisStreams, stream_name
from gateway.nodes import NodePool, Upstream
from node.errors import REASON_CODE, Reason, trailer

log = logging.getLogger(__name__)

READ_BLOCK_MS = 2_000
READ_COUNT = 500


def open_node_stream(upstream: Upstream, kind: Kind, *, after_event_id: int = 0, from_block: int = 0) -> Any:
    """The node's SubscribeMessages (every message, no filter) or SubscribeBlocks (headers only) call."""
    if kind is Kind.MESSAGES:
        return upstream.chain.SubscribeMessages(
            rpc_pb2.SubscribeMessagesRequest(after_event_id=after_event_id, from_block=from_block)
        )
    return upstream.chain.SubscribeBlocks(
        rpc_pb2.SubscribeBlocksRequest(after_event_id=after_event_id, from_block=from_block, include_chunks=False)
    )


def event_of(kind: Kind, response: Any) -> Event:
    if kind is Kind.MESSAGES:
        return Event.from_message(response.message)
    return Event.from_block(response.block)


async def node_head(upstream: Upstream, timeout: float) -> int:
    reply = await upstream.chain.GetNodeStatus(rpc_pb2.GetNodeStatusRequest(), timeout=timeout)
    return int(reply.status.block_height)


class _Feed:
    def __init__(self, hub: Hub) -> None:
        self.hub = hub
        self.kind = hub.kind
        self.last_event_id: int | None = None
        self.backoff = Backoff()

    async def run(self) -> None:
        while not self.hub.closed:
            try:
                await self.follow()
            except asyncio.CancelledError:
                raise
            except grpc.aio.AioRpcError as err:
                if draining(err):  # the node shuts down: resume on the next node now, no backoff
                    log.info("%s feed: %s is draining; resuming on another node", self.kind.value, self.source)
                    self.backoff.reset()
                    continue
                log.warning("%s feed (%s): %s; reconnecting", self.kind.value, self.source, _brief(err))
            except (RedisError, OSError) as err:
                log.warning("%s feed (%s): %s; reconnecting", self.kind.value, self.source, _brief(err))
            except Exception:
                log.exception("%s feed (%s) failed; reconnecting", self.kind.value, self.source)
            await self.backoff.wait()

    @property
    def source(self) -> str:
        raise NotImplementedError

    async def follow(self) -> None:
        raise NotImplementedError

    def deliver(self, event: Event) -> None:
        expected = None if self.last_event_id is None else self.last_event_id + 1
        if expected is not None and event.event_id < expected:
            return  # replayed after a reconnect: already published
        if expected is not None and event.event_id > expected:
            log.warning(
                "%s feed (%s): event id %d follows %d (events %d..%d are missing here); clients resync",
                self.kind.value, self.source, event.event_id, self.last_event_id, expected, event.event_id - 1,
            )  # fmt: skip
            self.hub.reset(event.key)
        else:
            self.hub.publish(event)
        self.last_event_id = event.event_id
        self.backoff.reset()


class NodeFeed(_Feed):
    """Without Redis: the hub follows the node's own stream, in-process."""

    def __init__(self, hub: Hub, pool: NodePool) -> None:
        super().__init__(hub)
        self.pool = pool
        self.address = ""

    @property
    def source(self) -> str:
        return f"node {self.address or '?'}"

    async def follow(self) -> None:
        await self.pool.wait_until_up()  # a gateway started before its node waits quietly (gateway/nodes.py)
        upstream = self.pool.pick()
        self.address = upstream.address
        if not self.hub.ready.is_set():
            self.hub.start_at(start_position(self.kind, await node_head(upstream, self.pool.timeout)))
        if self.last_event_id is not None:
            call = open_node_stream(upstream, self.kind, after_event_id=self.last_event_id)
        else:
            call = open_node_stream(upstream, self.kind, from_block=self.hub.position.block + 1)
        try:
            async for response in call:
                try:
                    event = event_of(self.kind, response)
                except Exception:
                    log.exception("%s feed: cannot read event %d; skipped", self.kind.value, response.event_id)
                    self.last_event_id = int(response.event_id)
                    continue
                self.deliver(event)
        finally:
            call.cancel()
        log.info("%s feed: the stream from node %s ended; reconnecting", self.kind.value, upstream.address)


class RedisFeed(_Feed):
    """With Redis: the hub follows the Redis Stream the relays write (XREAD BLOCK from its position)."""

    def __init__(self, hub: Hub, streams: RedisStreams) -> None:
        super().__init__(hub)
        self.streams = streams

    @property
    def source(self) -> str:
        return f"redis {stream_name(self.kind)}"

    async def follow(self) -> None:
        if not self.hub.ready.is_set():
            await self._start()
        while not self.hub.closed:
            events, last = await self.streams.read(
                self.kind, self.hub.position, block_ms=READ_BLOCK_MS, count=READ_COUNT
            )
            for event in events:
                self.deliver(event)
            if last is not None and last > self.hub.position:  # malformed entries skipped at the end
                self.hub.position = last
                self.last_event_id = None

    async def _start(self) -> None:
        """Start at the stream's last entry, or at its origin while it is empty; wait for a relay to set one."""
        while True:
            last = await self.streams.last(self.kind)
            if last is not None:
                self.last_event_id = last.event_id
                self.hub.start_at(last.key)
                return
            origin = await self.streams.origin(self.kind)
            if origin is not None:
                self.hub.start_at(start_position(self.kind, origin))
                return
            await asyncio.sleep(0.1)


def draining(err: BaseException) -> bool:
    """A node ended the stream because it shuts down (UNAVAILABLE, reason DRAINING): reconnect elsewhere."""
    if not isinstance(err, grpc.aio.AioRpcError) or err.code() != grpc.StatusCode.UNAVAILABLE:
        return False
    return trailer(err.trailing_metadata(), REASON_CODE) == Reason.DRAINING


def _brief(err: BaseException) -> str:
    if isinstance(err, grpc.aio.AioRpcError):
        return f"{err.code().name}: {err.details()}"
    return f"{type(err).__name__}: {err}"
