"""History for a resuming client: the events in (after, until], in order, where `until` is the hub's position
when the client subscribed (its queue holds everything later).

From Redis when the stream still holds every event after `after`; otherwise, and without Redis, from the
node: ListMessages over the block range (a bounded read, so it ends at `until` even on an idle chain) and
SubscribeBlocks from the next block, closed at `until`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Protocol

from chain.v1 import rpc_pb2
from gateway.events.feeds import node_head, open_node_stream
from gateway.events.model import Event, EventKey, Kind
from gateway.events.redis_streams import RedisStreams
from gateway.upstream import NodePool, Upstream

PAGE = 200  # the node's page cap
REDIS_PAGE = 500


class HistoryUnavailable(Exception):
    """No source can serve the history now (e.g. every node is behind the requested range)."""


class History(Protocol):
    def pages(self, kind: Kind, after: EventKey, until: EventKey) -> AsyncIterator[list[Event]]:
        """The events in (after, until], in order, a page at a time (each page is sent in one write)."""
        ...


class NodeHistory:
    def __init__(self, pool: NodePool) -> None:
        self.pool = pool

    async def pages(self, kind: Kind, after: EventKey, until: EventKey) -> AsyncIterator[list[Event]]:
        if until <= after or until.block == 0:
            return
        upstream = await self._caught_up(until.block)
        if kind is Kind.MESSAGES:
            iterator = self._messages(upstream, after, until)
        else:
            iterator = self._blocks(upstream, after, until)
        async for page in iterator:
            yield page

    async def _caught_up(self, block: int) -> Upstream:
        """A node that has applied `block` (replicated nodes may lag one another)."""
        heights = []
        for _ in self.pool.upstreams:
            upstream = self.pool.pick()
            height = await node_head(upstream, self.pool.timeout)
            if height >= block:
                return upstream
            heights.append(f"{upstream.address} at {height}")
        raise HistoryUnavailable(f"no node has block {block} yet ({', '.join(heights)})")

    async def _messages(self, upstream: Upstream, after: EventKey, until: EventKey) -> AsyncIterator[list[Event]]:
        token = ""
        while True:
            request = rpc_pb2.ListMessagesRequest(
                start_block=max(after.block, 1), end_block=until.block, page_size=PAGE, page_token=token
            )
            reply = await upstream.chain.ListMessages(request, timeout=self.pool.timeout)
            events = (Event.from_message(m) for m in reply.messages)
            yield [e for e in events if after < e.key <= until]
            token = reply.next_page_token
            if not token:
                return

    async def _blocks(self, upstream: Upstream, after: EventKey, until: EventKey) -> AsyncIterator[list[Event]]:
        call = open_node_stream(upstream, Kind.BLOCKS, from_block=after.block + 1)
        try:
            async for response in call:
                event = Event.from_block(response.block)
                if event.key > until:
                    return
                if event.key > after:
                    yield [event]
                if event.key == until:
                    return
        finally:
            call.cancel()


class RedisHistory:
    """From the Redis Stream (XRANGE, exclusive start) while it covers the range; from the node otherwise."""

    def __init__(self, streams: RedisStreams, fallback: NodeHistory) -> None:
        self.streams = streams
        self.fallback = fallback
        self.fallbacks = 0

    async def pages(self, kind: Kind, after: EventKey, until: EventKey) -> AsyncIterator[list[Event]]:
        cursor = after
        while cursor < until:
            page = await self.streams.range(kind, cursor, until, count=REDIS_PAGE)
            # Checked after the read: trimming only moves forward, so a page read while nothing after
            # `cursor` had been trimmed is complete.
            if not await self.streams.covers(kind, cursor):
                self.fallbacks += 1
                async for fallback_page in self.fallback.pages(kind, cursor, until):
                    yield fallback_page
                return
            yield page
            if len(page) < REDIS_PAGE:
                return
            cursor = page[-1].key
