"""One etcd read for every linearizable read that is waiting for it, as etcd batches its own ReadIndex.

A linearizable read needs the log's height read after the read arrived. Callers that arrive while no etcd
read is being sent share the next one; callers that arrive while one is in flight wait for the one after
it (which is sent only after they arrived). So every caller gets a height read from etcd after it asked,
and a follower under many linearizable reads makes one etcd round trip at a time instead of one per read.

    index = Coalesced(read_log_height)
    height = await index()
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable


class Coalesced:
    def __init__(self, read: Callable[[], Awaitable[int]]) -> None:
        self._read = read
        self._next: asyncio.Future[int] | None = None  # the read the callers arriving now share (not sent yet)
        self._driver: asyncio.Task[None] | None = None
        self.reads = 0  # etcd reads sent

    async def __call__(self) -> int:
        if self._next is None:
            self._next = asyncio.get_running_loop().create_future()
            self._next.add_done_callback(_retrieved)
        waiting = self._next
        if self._driver is None or self._driver.done():
            self._driver = asyncio.create_task(self._drive(), name="read-index")
        return await asyncio.shield(waiting)  # a caller's deadline cancels its wait, not the shared read

    async def _drive(self) -> None:
        while self._next is not None:
            sent, self._next = self._next, None  # serves exactly the callers that arrived before it is sent
            self.reads += 1
            try:
                sent.set_result(await self._read())
            except Exception as exc:  # every caller of this read gets the failure
                sent.set_exception(exc)


def _retrieved(future: asyncio.Future[int]) -> None:
    """Mark a failure seen even when every caller of the read gave up waiting for it."""
    if not future.cancelled():
        future.exception()
