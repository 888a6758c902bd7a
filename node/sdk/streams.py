"""Following SubscribeBlocks and SubscribeMessages across broken streams, with no gap and no repeat.

Every streamed item carries an event id: a block's is its number, a message's the count of committed
messages up to it (1, 2, ...). The client keeps the last one it handed out; when the stream breaks (the
node drains: UNAVAILABLE with DRAINING; the connection drops; the subscriber fell behind: SLOW_SUBSCRIBER;
the node holds too many streams: TOO_MANY_STREAMS) it opens the stream again with `after_event_id` = that
id, and the node sends what came after it (history first, then live). A subscription that starts "now"
first asks the node where now is (the head block, the message count), so that a break before the first
item still resumes from there.

`reconnect_seconds` bounds how long the client tries to reopen a broken stream (counted from the break,
reset by every item received); the waits follow the node's `retry-after-ms`, else grow from 0.1 s to 2 s.
A failure that retrying cannot fix (TLS, an invalid argument, ...) is raised at once, as a ChainError.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, AsyncIterable, Callable, Generator, Iterable
from dataclasses import dataclass
from typing import Protocol, TypeVar

import grpc

from node.errors import Reason
from node.sdk.errors import ChainError, Unavailable

FIRST_WAIT = 0.1
LONGEST_WAIT = 2.0


class Event(Protocol):
    """A streamed item: SubscribeBlocksResponse or SubscribeMessagesResponse."""

    @property
    def event_id(self) -> int: ...


E = TypeVar("E", bound=Event)


@dataclass(frozen=True)
class Cursor:
    """Where a stream (re)starts: after `after_event_id` (exclusive), or before any item, from `from_block`."""

    after_event_id: int = 0
    from_block: int = 0

    @classmethod
    def start(cls, after_event_id: int | None, from_block: int | None) -> Cursor | None:
        """Where a subscription asked to start; None: from now (not said)."""
        if after_event_id is not None:
            return cls.after(after_event_id)
        if from_block:
            return cls(from_block=from_block)
        return None

    @classmethod
    def after(cls, event_id: int) -> Cursor:
        """After `event_id`; after nothing (0) is from the first block."""
        return cls(after_event_id=event_id) if event_id else cls(from_block=1)


class Reconnect:
    """How long to wait before reopening a broken stream, within a budget of `seconds` from the break."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.broken_at: float | None = None
        self.wait = FIRST_WAIT

    def reset(self) -> None:
        """An item arrived: the stream is healthy again."""
        self.broken_at = None
        self.wait = FIRST_WAIT

    def next_wait(self, err: ChainError) -> float | None:
        """Seconds to wait before reopening after `err`, or None: raise it (not resumable, or out of time)."""
        if not (err.retryable or err.reason == Reason.SLOW_SUBSCRIBER):
            return None
        now = time.monotonic()
        if self.broken_at is None:
            self.broken_at = now
        wait = err.retry_after if err.retry_after is not None else self.wait
        if now + wait > self.broken_at + self.seconds:
            return None
        self.wait = min(LONGEST_WAIT, self.wait * 2)
        return wait


def ended() -> ChainError:
    """A stream the node closed without an error (it never does while serving): resumed like a break."""
    return Unavailable(Reason.UNAVAILABLE, "the node ended the stream")


def follow(
    open_stream: Callable[[Cursor], Iterable[E]],
    cursor: Cursor,
    convert: Callable[[grpc.RpcError], ChainError],
    reconnect: Reconnect | None,
) -> Generator[E, None, None]:
    """The items of the stream `open_stream(cursor)` opens, reopened after each break from the last event
    id (`reconnect` None: a break is raised)."""
    while True:
        stream = open_stream(cursor)
        try:
            for item in stream:
                cursor = Cursor(after_event_id=item.event_id)
                if reconnect is not None:
                    reconnect.reset()
                yield item
            err = ended()
        except grpc.RpcError as raw:
            err = convert(raw)
        finally:
            cancel = getattr(stream, "cancel", None)
            if cancel is not None:
                cancel()
        wait = reconnect.next_wait(err) if reconnect is not None else None
        if wait is None:
            raise err
        time.sleep(wait)


async def afollow(
    open_stream: Callable[[Cursor], AsyncIterable[E]],
    cursor: Cursor,
    convert: Callable[[grpc.RpcError], ChainError],
    reconnect: Reconnect | None,
) -> AsyncGenerator[E, None]:
    """`follow` over grpc.aio streams."""
    while True:
        stream = open_stream(cursor)
        try:
            async for item in stream:
                cursor = Cursor(after_event_id=item.event_id)
                if reconnect is not None:
                    reconnect.reset()
                yield item
            err = ended()
        except grpc.RpcError as raw:
            err = convert(raw)
        finally:
            cancel = getattr(stream, "cancel", None)
            if cancel is not None:
                cancel()
        wait = reconnect.next_wait(err) if reconnect is not None else None
        if wait is None:
            raise err
        await asyncio.sleep(wait)
