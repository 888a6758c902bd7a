"""SSE streams of committed messages and blocks, fanned out from the node or from Redis Streams.

    GET /v1/events/messages?project_id=0x...&types=COMMIT_BUNDLE,REF_UPDATE
    GET /v1/events/blocks

See docs/events.md for the event format, ids, resume semantics and the Redis layout.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from aiohttp import web

from gateway.events.service import EventService
from gateway.events.sse import blocks_handler, messages_handler
from gateway.keys import CONFIG, EVENTS, NODES


def setup_events(app: web.Application) -> None:
    """Register /v1/events/messages and /v1/events/blocks and the relay / Redis reader."""
    app.router.add_get("/v1/events/messages", messages_handler)
    app.router.add_get("/v1/events/blocks", blocks_handler)
    app.cleanup_ctx.append(_events)
    app.on_shutdown.append(_end_streams)


async def _events(app: web.Application) -> AsyncIterator[None]:
    service = EventService(app[CONFIG], app[NODES])
    app[EVENTS] = service
    await service.start()
    yield
    await service.stop()


async def _end_streams(app: web.Application) -> None:
    if EVENTS in app:
        app[EVENTS].close_streams()
