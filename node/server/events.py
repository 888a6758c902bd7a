"""Live events: committed blocks and messages fanned out to subscribers.

Each subscriber owns a bounded queue. Publishing never waits: a subscriber
whose queue is full is detached and handed an end-of-stream marker, and its stream ends
with RESOURCE_EXHAUSTED (SLOW_SUBSCRIBER), so a slow client can never stall block production.
When the node drains, `close()` ends every stream with UNAVAILABLE (DRAINING) instead: the
client did nothing wrong and should resume from its last event id on another node.

At most `max_subscribers` streams are open at once (`--max-streams`): one more is refused
RESOURCE_EXHAUSTED (TOO_MANY_STREAMS) with a `retry-after-ms` hint before it holds anything.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from chain.v1 import block_pb2
from node.errors import MessageRejected, Reason

# how long a client refused TOO_MANY_STREAMS is asked to wait before it tries again
STREAMS_RETRY_AFTER_MS = 2000


class Overflowed(Exception):
    """The subscriber fell too far behind and was dropped."""


class Draining(Exception):
    """The node is shutting down: the stream ends so the client resumes elsewhere."""


_DRAINING = object()  # the queue item that ends a stream on drain (None ends it on overflow)


@dataclass(eq=False)
class Subscriber:
    kind: str  # "blocks" or "messages"
    queue: asyncio.Queue[block_pb2.Block | block_pb2.CommittedMessage | object | None]
    delivered: int = field(default=0)

    async def next(self) -> block_pb2.Block | block_pb2.CommittedMessage:
        item = await self.queue.get()
        if item is None:
            raise Overflowed
        if item is _DRAINING:
            raise Draining
        assert isinstance(item, block_pb2.Block | block_pb2.CommittedMessage)
        return item


class Heights:
    """The newest block published, and waits for a block number (the consistent reads of
    node/server/rpc/consistency.py wait on it: woken by the commit, never polling)."""

    def __init__(self) -> None:
        self.height = -1  # none published yet
        self._waiting: dict[int, asyncio.Future[None]] = {}  # block number -> woken when it is published

    def advance(self, number: int) -> None:
        self.height = max(self.height, number)
        for wanted in [w for w in self._waiting if w <= number]:
            future = self._waiting.pop(wanted)
            if not future.done():
                future.set_result(None)

    async def reach(self, number: int) -> None:
        """Return once block `number` (or a later one) has been published."""
        if self.height >= number:
            return
        future = self._waiting.get(number)
        if future is None or future.done():
            future = self._waiting[number] = asyncio.get_running_loop().create_future()
        await asyncio.shield(future)  # one waiter cancelled (its deadline) does not cancel the others'


class EventHub:
    def __init__(self, queue_size: int, max_subscribers: int = 0) -> None:
        """`max_subscribers`: streams open at once at most (0: no limit)."""
        self.heights = Heights()
        self.queue_size = queue_size
        self.max_subscribers = max_subscribers
        self._subscribers: set[Subscriber] = set()
        self.dropped_subscribers = 0
        self.refused_subscribers = 0

    def __len__(self) -> int:
        return len(self._subscribers)

    def subscribe(self, kind: str) -> Subscriber:
        if self.max_subscribers and len(self._subscribers) >= self.max_subscribers:
            self.refused_subscribers += 1
            raise MessageRejected(
                Reason.TOO_MANY_STREAMS,
                f"this node holds {self.max_subscribers} streams already; retry later or on another node",
                limit=self.max_subscribers,
                retry_after_ms=STREAMS_RETRY_AFTER_MS,
            )
        # one slot is kept for the overflow marker
        sub = Subscriber(kind, asyncio.Queue(maxsize=self.queue_size + 1))
        self._subscribers.add(sub)
        return sub

    def unsubscribe(self, sub: Subscriber) -> None:
        self._subscribers.discard(sub)

    def publish(self, block: block_pb2.Block, messages: list[block_pb2.CommittedMessage]) -> None:
        for sub in list(self._subscribers):
            items: list[block_pb2.Block | block_pb2.CommittedMessage] = [block] if sub.kind == "blocks" else [*messages]
            if sub.queue.qsize() + len(items) > self.queue_size:
                self._drop(sub)
                continue
            for item in items:
                sub.queue.put_nowait(item)
        self.heights.advance(int(block.header.number))

    def _drop(self, sub: Subscriber) -> None:
        self._subscribers.discard(sub)
        self.dropped_subscribers += 1
        sub.queue.put_nowait(None)

    def close(self) -> None:
        """Drain: end every stream with DRAINING (after what is already queued for it)."""
        for sub in list(self._subscribers):
            self._subscribers.discard(sub)
            if sub.queue.full():  # the slot kept for a marker is taken only by an overflow marker
                continue
            sub.queue.put_nowait(_DRAINING)
