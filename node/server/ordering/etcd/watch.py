"""Wake the orderer's loop when the block log moves, instead of polling it.

`LogWatch` holds an etcd watch on the log's `next` key (every append puts it)
and sets the loop's wake event on each change, and once when the watch is
created, so the first read after it cannot miss an append. While the watch is
live the loop reads the log when woken and, as a safety net, once per resync
interval; while it is not (connecting, broken, etcd unreachable) the loop
polls as before. A resync read that finds the log moved without a wake means
the watch went silent (a member that lost its peers keeps the stream open and
sends nothing): the loop calls `restart`, which opens it again on the endpoint
the client last reached.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from node.server.ordering.etcd.client import EtcdClient, EtcdUnavailable

log = logging.getLogger("chain.replicated")


class LogWatch:
    def __init__(self, client: EtcdClient, key: bytes, wake: asyncio.Event, *, retry: float = 0.5) -> None:
        self.client = client
        self.key = key
        self.wake = wake
        self.retry = retry
        self.live = False  # the watch is created and its stream open
        self.opened = 0  # streams opened so far
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="etcd-log-watch")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self.live = False

    async def restart(self) -> None:
        await self.stop()
        self.start()

    async def _run(self) -> None:
        while True:
            try:
                self.opened += 1
                async for response in self.client.watch(self.key):
                    if response.canceled:
                        log.info("etcd cancelled the log watch (%s); opening it again", response.cancel_reason)
                        break
                    self.live = self.live or response.created
                    self.wake.set()
            except EtcdUnavailable as exc:
                log.debug("log watch broken: %s", exc)
            except Exception:  # a long-running task never dies on one bad stream
                log.exception("log watch failed; opening it again")
            self.live = False
            self.wake.set()  # read now: the loop polls until the watch is back
            await asyncio.sleep(self.retry)
