"""Connection hygiene for the gateway's HTTP listener: a header deadline and a cap on open connections.

    guard = ConnectionGuard(header_timeout=10.0, max_connections=1024)
    app.middlewares.insert(0, guard.middleware)       # marks when a request's headers are complete
    site = GuardedSite(runner, host, port, guard)      # every connection goes through the guard

aiohttp has no deadline for reading a request's headers: a client that sends a header line every few
seconds keeps its connection (and a file descriptor) forever, and a few hundred such connections hold the
process (slowloris). The guard closes a connection whose request headers are not complete within
`header_timeout` of the connection opening or of the first byte of its next request (checked by a sweep
every quarter of that, at most every second), and refuses
connections beyond `max_connections` (closed at once, counted). Idle keep-alive connections are closed by
aiohttp's own `keepalive_timeout` (`--idle-timeout`). A request whose headers arrived (a slow handler, a
long SSE stream) is never cut by the guard.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Callable
from typing import cast

from aiohttp import web

from gateway.errors import Handler
from gateway.protocol import json_error_protocol

log = logging.getLogger(__name__)


class _Guarded(asyncio.Protocol):
    """Stands between the transport and aiohttp's protocol: forwards everything, times the headers."""

    def __init__(self, guard: ConnectionGuard, inner: asyncio.Protocol) -> None:
        self.guard = guard
        self.inner = inner
        self.transport: asyncio.Transport | None = None
        self.in_request = False
        self.admitted = False
        self.deadline: float | None = None  # loop time by which the headers must be complete

    # ---- the guard's part ----
    def _arm(self) -> None:
        if self.deadline is None and not self.in_request:
            self.deadline = self.guard.loop_time() + self.guard.header_timeout

    def expire(self) -> None:
        """The deadline passed (the guard's sweep): closed unless a request's headers came meanwhile."""
        self.deadline = None
        if not self.in_request and self.transport is not None and not self.transport.is_closing():
            self.guard.timed_out += 1
            self.transport.abort()

    def request_started(self) -> None:
        self.in_request = True
        self.deadline = None

    def request_finished(self) -> None:
        self.in_request = False  # idle now: aiohttp's keep-alive timeout applies until the next byte

    # ---- asyncio.Protocol, forwarded ----
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # asyncio's own or uvloop's TCP transport (not an `asyncio.Transport` subclass, the same methods)
        self.transport = cast(asyncio.Transport, transport)
        if len(self.guard.open) >= self.guard.max_connections:
            self.guard.refused += 1
            self.transport.abort()  # over the cap: aiohttp never sees it
            return
        self.admitted = True
        self.guard.admit(self.transport, self)
        self._arm()
        self.inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        if not self.admitted:
            return
        if not self.in_request:
            self._arm()  # the first byte of a request starts its header deadline
        self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self.inner.eof_received() if self.admitted else None

    def connection_lost(self, exc: Exception | None) -> None:
        self.deadline = None
        if self.admitted and self.transport is not None:
            self.guard.open.pop(self.transport, None)
            self.inner.connection_lost(exc)

    def pause_writing(self) -> None:
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.inner.resume_writing()


class ConnectionGuard:
    """The header deadlines are checked by one sweep every `period` seconds (a quarter of the deadline, at
    most 1 s) over the open connections, not by a timer per request: a request costs a clock read, and a
    connection past its deadline is closed within `header_timeout + period`. The sweep runs while
    connections are open."""

    def __init__(self, header_timeout: float, max_connections: int) -> None:
        self.header_timeout = header_timeout
        self.max_connections = max_connections
        self.period = min(1.0, header_timeout / 4)
        self.open: dict[asyncio.BaseTransport, _Guarded] = {}
        self.timed_out = 0  # connections closed for not completing their headers in time
        self.refused = 0  # connections refused over the cap
        self._loop: asyncio.AbstractEventLoop | None = None
        self._sweep: asyncio.TimerHandle | None = None

    def loop_time(self) -> float:
        assert self._loop is not None  # set by the first admitted connection
        return self._loop.time()

    def admit(self, transport: asyncio.BaseTransport, conn: _Guarded) -> None:
        self.open[transport] = conn
        if self._sweep is None:
            self._loop = asyncio.get_running_loop()
            self._sweep = self._loop.call_later(self.period, self._swept)

    def _swept(self) -> None:
        assert self._loop is not None
        now = self._loop.time()
        for conn in [c for c in self.open.values() if c.deadline is not None and c.deadline <= now]:
            conn.expire()
        self._sweep = self._loop.call_later(self.period, self._swept) if self.open else None

    def factory(self, make: Callable[[], asyncio.Protocol]) -> Callable[[], asyncio.Protocol]:
        return lambda: _Guarded(self, make())

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        conn = self.open.get(request.transport) if request.transport is not None else None
        if conn is not None:
            conn.request_started()
        try:
            return await handler(request)
        finally:
            if conn is not None:
                conn.request_finished()


class GuardedSite(web.TCPSite):
    """A TCP site whose connections go through `guard` (binding exclusively, no SO_REUSEPORT); TLS with the
    `ssl_context` keyword, as aiohttp's own TCPSite. It keeps its own copy of what it binds: aiohttp's site
    keeps them in private attributes."""

    def __init__(
        self,
        runner: web.AppRunner,
        host: str,
        port: int,
        guard: ConnectionGuard,
        *,
        ssl_context: ssl.SSLContext | None = None,
        backlog: int = 128,
        reuse_address: bool | None = None,
    ) -> None:
        super().__init__(
            runner, host, port, ssl_context=ssl_context, backlog=backlog, reuse_address=reuse_address, reuse_port=False
        )
        self.guard = guard
        self.runner = runner
        self.bind = (host, port)
        self.tls = ssl_context
        self.backlog = backlog
        self.reuse_address = reuse_address

    async def start(self) -> None:
        await web.BaseSite.start(self)  # registers the site with the runner
        loop = asyncio.get_running_loop()
        server = self.runner.server
        assert server is not None
        # `_server` is where aiohttp's BaseSite keeps the listening server, which its `stop` closes
        self._server = await loop.create_server(
            self.guard.factory(lambda: json_error_protocol(server)),
            *self.bind,
            ssl=self.tls,
            backlog=self.backlog,
            reuse_address=self.reuse_address,
            reuse_port=False,
        )
