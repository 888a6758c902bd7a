"""The events service of one gateway process: two hubs, their feeds, the relays, the history source.

    with Redis:    node --Subscribe*--> Relay --XADD--> Redis Streams --XREAD--> RedisFeed --> Hub --> SSE
    without:       node --Subscribe*--> NodeFeed --> Hub --> SSE

Owned by the app's cleanup_ctx: `start()` after the node pool exists, `close_streams()` on shutdown (every
SSE stream ends), `stop()` at cleanup (background tasks cancelled, Redis closed).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Coroutine
from typing import Any

from redis.asyncio import Redis

from gateway.config import GatewayConfig
from gateway.events.feeds import NodeFeed, RedisFeed
from gateway.events.history import History, NodeHistory, RedisHistory
from gateway.events.hub import Hub
from gateway.events.model import Kind
from gateway.events.redis_client import redis_client
from gateway.events.redis_streams import RedisStreams
from gateway.events.relay import Relay
from gateway.upstream import NodePool

log = logging.getLogger(__name__)


class IpLimiter:
    """Open streams per client address."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.open: dict[str, int] = {}

    def acquire(self, ip: str) -> bool:
        n = self.open.get(ip, 0)
        if n >= self.limit:
            return False
        self.open[ip] = n + 1
        return True

    def release(self, ip: str) -> None:
        n = self.open.get(ip, 0) - 1
        if n > 0:
            self.open[ip] = n
        else:
            self.open.pop(ip, None)


class EventService:
    def __init__(self, config: GatewayConfig, pool: NodePool) -> None:
        self.config = config
        self.pool = pool
        self.hubs = {kind: Hub(kind, config.sse_queue) for kind in Kind}
        self.limiter = IpLimiter(config.sse_max_per_ip)
        self.redis: Redis | None = None
        self.relays: list[Relay] = []
        self.feeds: list[NodeFeed | RedisFeed] = []
        self.history: History = NodeHistory(pool)
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        if self.config.redis_url:
            self.redis = redis_client(self.config)  # credentials and TLS (gateway/events/redis_client.py)
            streams = RedisStreams(self.redis, self.config.redis_stream_maxlen)
            self.relays = [Relay(kind, self.pool, streams) for kind in Kind]
            self.feeds = [RedisFeed(hub, streams) for hub in self.hubs.values()]
            self.history = RedisHistory(streams, NodeHistory(self.pool))
            for relay in self.relays:
                self._spawn(relay.run(), f"relay-{relay.kind.value}")
        else:
            self.feeds = [NodeFeed(hub, self.pool) for hub in self.hubs.values()]
        for feed in self.feeds:
            self._spawn(feed.run(), f"feed-{feed.kind.value}")

    def close_streams(self) -> None:
        for hub in self.hubs.values():
            hub.close()
        for relay in self.relays:
            relay.stopping = True

    async def stop(self) -> None:
        self.close_streams()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()
        if self.redis is not None:
            await self.redis.aclose()
            self.redis = None

    def _spawn(self, coro: Coroutine[Any, Any, None], name: str) -> None:
        task = asyncio.create_task(coro, name=f"events-{name}")
        task.add_done_callback(_report_exit)
        self._tasks.append(task)


def _report_exit(task: asyncio.Task[None]) -> None:
    if task.cancelled():
        return
    err = task.exception()
    if err is not None:
        log.error("events task %s died", task.get_name(), exc_info=err)
