"""SSE streams and their Redis fan-out (the events work fills this in)."""

from __future__ import annotations

from aiohttp import web


def setup_events(app: web.Application) -> None:
    """Register /v1/events/messages and /v1/events/blocks and the relay / Redis reader."""
