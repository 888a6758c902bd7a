"""The one subscriber per kind and process that feeds a hub: from the node (no Redis) or from Redis.

Both follow their source forever: on a failure they log, wait (backoff) and resume after the last event
they published, so the hub sees every event once and in order. An event id that skips ahead (a source that
lost events, e.g. Redis entries trimmed while this gateway was away) resets the hub: its clients are told
to resume with their Last-Event-ID and get the missing events as history.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

import grpc
from redis.exceptions import RedisError

from chain.v1 import block_pb2, rpc_pb2
from gateway.events.backoff import Backoff
from gateway.events.hub import Hub
from gateway.events.model import Event, Kind, start_position
from gateway.events.redis_streams import RedisStreams, stream_name
from gateway.upstream import NodePool, Upstream
from node.errors import REASON_CODE, Reason, trailer

log = logging.getLogger(__name__)

READ_BLOCK_MS = 2_000
READ_COUNT = 500


def open_node_stream(
    upstream: Upstream, kind: Kind, *, after_event_id: int = 0, after_block: int = 0, from_block: int = 0,
    timeout: float = 10.0,
) -> Any:  # fmt: skip
    """The node's events of `kind`: after event `after_event_id` (for messages `after_block` is the block
    that holds it), else from block `from_block` (0: live only). Blocks come from SubscribeBlocks (headers
    only); messages from SubscribeBlocks with the blocks' messages (`MessagesOfBlocks`), not SubscribeMessages.
    Either way the result is iterated for responses and has `cancel()`."""
    if kind is Kind.MESSAGES:
        if after_event_id:  # from its block; with none known, from block 1 (slow, but exact: skipped up to it)
            return MessagesOfBlocks(upstream, max(after_block, 1), after_event_id, timeout)
        return MessagesOfBlocks(upstream, from_block, 0, timeout)
    return upstream.chain.SubscribeBlocks(
        rpc_pb2.SubscribeBlocksRequest(after_event_id=after_event_id, from_block=from_block, include_chunks=False)
    )


class MessagesOfBlocks:
    """The node's committed messages as SubscribeMessages gives them (every message in commit order, each a
    `SubscribeMessagesResponse` with its event id, block number and index), read from SubscribeBlocks with the
    blocks' messages.

    Why: SubscribeMessages costs the node one gRPC stream write per message and subscriber (~100 µs of its
    main process per message), and every gateway process holds one; a block's
    messages in one stream item cost it one write per block. Event ids are consecutive over committed
    messages, so a block's first event id is the previous block's first plus its message count; only
    the first block with messages after (re)connecting, or after a block number that does not follow,
    asks the node (GetMessage of its first message). Messages at or before `after_event_id` are skipped
    (a resume re-reads the block that holds it).

    A block too large for one gRPC message (blocks have no byte limit; the channels allow 64 MiB) ends the
    blocks stream with RESOURCE_EXHAUSTED (not the node's SLOW_SUBSCRIBER): this call then goes on with
    SubscribeMessages after the last event it gave, one message at a time, until it ends."""

    def __init__(self, upstream: Upstream, from_block: int, after_event_id: int, timeout: float) -> None:
        self._chain = upstream.chain
        self._call: Any = upstream.chain.SubscribeBlocks(
            rpc_pb2.SubscribeBlocksRequest(from_block=from_block, include_chunks=True)
        )
        self._last = after_event_id  # the last event id given (or skipped as already given)
        self._next_block = from_block  # the block the stream is to deliver next, once one came
        self._timeout = timeout

    def cancel(self) -> bool:
        return bool(self._call.cancel())

    async def __aiter__(self) -> AsyncIterator[rpc_pb2.SubscribeMessagesResponse]:
        try:
            async for response in self._of_blocks():
                yield response
        except grpc.aio.AioRpcError as err:
            if not _too_large(err):
                raise
            log.warning(
                "messages feed: a block did not fit one gRPC message (%s); following SubscribeMessages instead",
                err.details(),
            )
        if self._last:
            request = rpc_pb2.SubscribeMessagesRequest(after_event_id=self._last)
        else:
            request = rpc_pb2.SubscribeMessagesRequest(from_block=self._next_block)
        self._call = self._chain.SubscribeMessages(request)
        async for response in self._call:
            if response.event_id > self._last:
                self._last = int(response.event_id)
                yield response

    async def _of_blocks(self) -> AsyncIterator[rpc_pb2.SubscribeMessagesResponse]:
        next_id: int | None = None  # the event id of the next block's first message, once known
        follows = -1  # the block number that continues the count
        async for response in self._call:
            block = response.block
            number = int(block.header.number)
            messages = [m for chunk in block.chunks for m in chunk.messages]
            if len(messages) != block.header.message_count:
                raise ValueError(
                    f"block {number} came with {len(messages)} of its {block.header.message_count} messages"
                )
            if number != follows:
                next_id = None
            follows = self._next_block = number + 1
            if not messages:
                continue
            if next_id is None:
                reply = await self._chain.GetMessage(
                    rpc_pb2.GetMessageRequest(hash=messages[0].hash), timeout=self._timeout
                )
                next_id = int(reply.message.event_id)
            first, next_id = next_id, next_id + len(messages)
            for index, message in enumerate(messages):
                event_id = first + index
                if event_id <= self._last:
                    continue
                self._last = event_id
                record = block_pb2.CommittedMessage(
                    message=message, block_number=number, index=index, event_id=event_id
                )
                yield rpc_pb2.SubscribeMessagesResponse(event_id=event_id, message=record)


def _too_large(err: grpc.aio.AioRpcError) -> bool:
    """A stream item over a message size limit (sender's or receiver's), not the node's slow-subscriber end."""
    if err.code() != grpc.StatusCode.RESOURCE_EXHAUSTED:
        return False
    return trailer(err.trailing_metadata(), REASON_CODE) != Reason.SLOW_SUBSCRIBER


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
        await self.pool.wait_until_up()  # a gateway started before its node waits quietly (gateway/upstream/pool.py)
        upstream = self.pool.pick()
        self.address = upstream.address
        if not self.hub.ready.is_set():
            self.hub.start_at(start_position(self.kind, await node_head(upstream, self.pool.timeout)))
        if self.last_event_id is not None:  # the hub's position is at or before that event: its block
            call = open_node_stream(
                upstream, self.kind, after_event_id=self.last_event_id, after_block=self.hub.position.block,
                timeout=self.pool.timeout,
            )  # fmt: skip
        else:
            call = open_node_stream(
                upstream, self.kind, from_block=self.hub.position.block + 1, timeout=self.pool.timeout
            )
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
