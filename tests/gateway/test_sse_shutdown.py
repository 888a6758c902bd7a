"""A gateway scaled in (SIGTERM, after the chart's preStop wait) ends its SSE streams cleanly: the last frame is
the reconnect hint (the last event id sent and the retry delay), the chunked response ends properly, the process
exits 0, and the client resumes on another gateway from its last id with nothing lost or repeated. Real chain-node
and chain-gateway processes on loopback."""

from __future__ import annotations

import asyncio
import time

import aiohttp
import pytest

from tests.fixtures.actors import RemoteActor, new_account
from tests.fixtures.events import SseStream, bio_messages, commit_in_batches, event_ids, sse
from tests.fixtures.gwproc import GatewayProcess
from tests.fixtures.nodeproc import NodeProcess
from tests.fixtures.scrape import scrape, value


@pytest.fixture
def actor(node: NodeProcess) -> RemoteActor:
    with node.client() as c:
        return new_account(c, node.authority())


async def commit(node: NodeProcess, actor: RemoteActor, n: int, tag: str) -> list[str]:
    def run() -> list[str]:
        with node.client() as c:
            return event_ids(commit_in_batches(c, bio_messages(actor, n, tag), batch=10))

    return await asyncio.to_thread(run)


async def raw_tail(stream: SseStream, timeout: float = 15.0) -> list[str]:
    """Every line to the end of the stream; an abrupt end (no chunked terminator) raises ClientPayloadError."""
    lines: list[str] = []
    async with asyncio.timeout(timeout):
        while raw := await stream.response.content.readline():
            lines.append(raw.decode().rstrip("\r\n"))
    return lines


async def test_open_connections_are_the_gauge_the_hpa_scales_on(node: NodeProcess) -> None:
    """chain_http_connections: every open connection of the process (each SSE stream holds one), the per-pod metric
    of the chart's HPA with gateway.autoscaling.metric=connections."""
    gw = GatewayProcess(node.grpc_target, args=("--sse-heartbeat", "1")).start()
    port = int(gw.ready["metrics_port"])

    async def connections_become(n: int) -> None:
        deadline = time.monotonic() + 10
        while (seen := value(await asyncio.to_thread(scrape, port), "chain_http_connections")) != n:
            assert time.monotonic() < deadline, f"{seen} open connections, not {n}"
            await asyncio.sleep(0.1)

    try:
        async with aiohttp.ClientSession() as s, sse(s, f"{gw.url}/v1/events/blocks"):
            async with aiohttp.ClientSession() as other, sse(other, f"{gw.url}/v1/events/messages"):
                await connections_become(2)
                samples = await asyncio.to_thread(scrape, port)
                assert value(samples, "chain_sse_clients", chain_stream_kind="blocks") == 1
                assert value(samples, "chain_sse_clients", chain_stream_kind="messages") == 1
            await connections_become(1)
        await connections_become(0)
    finally:
        gw.stop()


async def test_sigterm_ends_streams_with_the_reconnect_hint_and_clients_resume_elsewhere(
    node: NodeProcess, actor: RemoteActor
) -> None:
    flags = ("--sse-heartbeat", "1")
    a = GatewayProcess(node.grpc_target, args=flags).start()
    b = GatewayProcess(node.grpc_target, args=flags).start()
    try:
        async with aiohttp.ClientSession() as s:
            async with sse(s, f"{a.url}/v1/events/messages") as on_a:
                first = await commit(node, actor, 30, "before")
                got = await on_a.events(30)
                assert [e.id for e in got] == first
                assert a.proc is not None
                a.proc.terminate()  # what the kubelet sends once the preStop wait is over
                started = time.monotonic()
                tail = [line for line in await raw_tail(on_a) if line != ": ping"]
                assert a.proc.wait(15) == 0
                assert time.monotonic() - started < 10
            # The last frame: a comment, the last id the client has, the retry delay; no event in it.
            assert tail[-4:] == [
                ": the gateway is shutting down; reconnect with Last-Event-ID",
                f"id: {first[-1]}",
                "retry: 1000",
                "",
            ], tail
            assert not any(line.startswith(("data:", "event:")) for line in tail), tail

            # Meanwhile more commits; the client resumes on gateway b from the id it kept.
            second = await commit(node, actor, 20, "after")
            async with sse(s, f"{b.url}/v1/events/messages", last_event_id=first[-1]) as on_b:
                assert [e.id for e in await on_b.events(20)] == second
                third = await commit(node, actor, 5, "live")
                assert [e.id for e in await on_b.events(5)] == third
    finally:
        for gw in (a, b):
            gw.stop()
