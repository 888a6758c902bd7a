"""Helpers shared by the events tests (no tests here): a gateway app served in-process, an SSE reader over
aiohttp's client, an EventSource-like follower that reconnects with Last-Event-ID, message generators."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from aiohttp.test_utils import TestServer

from chain.v1 import message_pb2 as pb
from gateway.app import build_app
from gateway.config import GatewayConfig
from node.sdk.rpc import ChainClient
from tests.node.server.actors import RemoteActor


@asynccontextmanager
async def gateway(config: GatewayConfig) -> AsyncIterator[TestServer]:
    server = TestServer(build_app(config), host="127.0.0.1")
    await server.start_server()
    try:
        yield server
    finally:
        await server.close()


@dataclass
class SseEvent:
    event: str = "message"
    id: str | None = None
    data: str = ""
    comments: list[str] = field(default_factory=list)

    def json(self) -> Any:
        return json.loads(self.data)


class SseStream:
    """Reads events from an open SSE response; comments (`: ping`) are returned as event ":"."""

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self.response = response
        self.last_id: str | None = None

    async def next(self, timeout: float = 10.0) -> SseEvent | None:
        """The next event or comment; None at the end of the stream."""
        async with asyncio.timeout(timeout):
            current = SseEvent()
            has_fields = False
            while True:
                raw = await self.response.content.readline()
                if not raw:
                    return None
                line = raw.decode().rstrip("\r\n")
                if line == "":
                    if has_fields:
                        if current.id is not None:
                            self.last_id = current.id
                        return current
                    continue
                if line.startswith(":"):
                    if not has_fields:
                        return SseEvent(event=":", data=line[1:].strip())
                    continue
                name, _, value = line.partition(":")
                value = value[1:] if value.startswith(" ") else value
                if name == "id":
                    current.id, has_fields = value, True
                elif name == "event":
                    current.event, has_fields = value, True
                elif name == "data":
                    current.data = value if not current.data else current.data + "\n" + value
                    has_fields = True

    async def events(self, n: int, timeout: float = 30.0, kind: str | None = None) -> list[SseEvent]:
        """The next `n` events (comments skipped); fails on a timeout or an early end."""
        out: list[SseEvent] = []
        async with asyncio.timeout(timeout):
            while len(out) < n:
                ev = await self.next(timeout)
                assert ev is not None, f"stream ended after {len(out)} of {n} events"
                if ev.event == ":":
                    continue
                assert kind is None or ev.event == kind, ev
                out.append(ev)
        return out


@asynccontextmanager
async def sse(
    session: aiohttp.ClientSession, url: str, *, last_event_id: str | None = None, expect: int = 200
) -> AsyncIterator[SseStream]:
    headers = {"Accept": "text/event-stream"}
    if last_event_id:
        headers["Last-Event-ID"] = last_event_id
    async with session.get(url, headers=headers, timeout=aiohttp.ClientTimeout(total=None, sock_read=None)) as r:
        assert r.status == expect, (r.status, await r.text())
        if expect == 200:
            assert r.headers["Content-Type"].startswith("text/event-stream")
        yield SseStream(r)


async def follow(
    session: aiohttp.ClientSession, url: str, n: int, *, last_event_id: str | None = None, timeout: float = 60.0
) -> tuple[list[SseEvent], int]:
    """Like EventSource: read `n` events, reconnecting with Last-Event-ID after an `error` event or the end of
    the stream; the events and how many times it reconnected."""
    out: list[SseEvent] = []
    reconnects = -1
    async with asyncio.timeout(timeout):
        while len(out) < n:
            reconnects += 1
            try:
                async with sse(session, url, last_event_id=last_event_id) as stream:
                    while len(out) < n:
                        ev = await stream.next(timeout)
                        if ev is None or ev.event == "error":
                            break
                        if ev.event != ":":
                            out.append(ev)
                            last_event_id = ev.id
            except (aiohttp.ClientError, ConnectionError, AssertionError):
                await asyncio.sleep(0.2)  # e.g. 503 while the gateway's source is away
    return out, reconnects


def bio_messages(actor: RemoteActor, n: int, tag: str = "m") -> list[pb.Message]:
    """`n` distinct ACCOUNT_DATA messages (non-decreasing timestamps, so none is stale)."""
    return [actor.b.account_data(pb.ACCOUNT_FIELD_BIO, f"{tag} {i}") for i in range(n)]


def commit_in_batches(client: ChainClient, messages: Sequence[pb.Message], batch: int) -> list[tuple[int, int]]:
    """Commit `messages` in batches (each batch waits for its commit, so batches land in different blocks);
    the (block, index) of each message, in commit order."""
    out: list[tuple[int, int]] = []
    for i in range(0, len(messages), batch):
        for m in client.commit(*messages[i : i + batch]):
            out.append((int(m.block_number), int(m.index)))
    return sorted(out)


def event_ids(keys: Sequence[tuple[int, int]]) -> list[str]:
    return [f"{b}-{i}" for b, i in keys]
