"""REST routes under /v1 (the rest-routes work fills this in)."""

from __future__ import annotations

from aiohttp import web


def setup_rest(app: web.Application) -> None:
    """Register the REST routes, OpenAPI document and validation, error middleware, gRPC-web passthrough."""
