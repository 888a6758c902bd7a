"""Wake a loop when an etcd key changes, instead of polling it.

`KeyWatch` holds an etcd watch on one key and sets its loop's wake event on
each change, and once when the watch is created, so the first read after it
cannot miss a change. Two loops use one: the orderer's, on the log's `next`
key (every append puts it), and the election's, on the `leader` key (a
campaign puts it; a lease that expires or is revoked deletes it). While the
watch is live a loop reads when woken and, as a safety net, on its own slower
schedule; while it is not (connecting, broken, etcd unreachable) the loop
polls on its own. A scheduled read that finds the key moved without a wake
means the watch went silent (a member that lost its peers keeps the stream
open and sends nothing): the loop calls `restart`, which opens it again on
the endpoint the client last reached.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from node.server.ordering.etcd.client import EtcdClient, EtcdUnavailable

log = logging.getLogger("chain.replicated")


class KeyWatch:
    def __init__(
        self, client: EtcdClient, key: bytes, wake: asyncio.Event, *, what: str = "log", retry: float = 0.5
    ) -> None:
        """`what` names the watch in its task and its log lines ("log", "leader")."""
        self.client = client
        self.key = key
        self.wake = wake
        self.what = what
        self.retry = retry
        self.live = False  # the watch is created and its stream open
        self.opened = 0  # streams opened so far
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=f"etcd-{self.what}-watch")

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
                        why = response.cancel_reason
                        log.info("etcd cancelled the %s watch (%s); opening it again", self.what, why)
                        break
                    self.live = self.live or response.created
                    self.wake.set()
            except EtcdUnavailable as exc:
                log.debug("%s watch broken: %s", self.what, exc)
            except Exception:  # a long-running task never dies on one bad stream
                log.exception("%s watch failed; opening it again", self.what)
            self.live = False
            self.wake.set()  # read now: the loop polls until the watch is back
            await asyncio.sleep(self.retry)
