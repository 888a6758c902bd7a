"""SSE fan-out through Redis Streams: real chain-node, real redis-server, real chain-gateway processes."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import suppress
from pathlib import Path

import aiohttp
import pytest
from redis.asyncio import Redis

from chain.v1 import message_pb2 as pb
from gateway.config import GatewayConfig
from gateway.events.history import RedisHistory
from gateway.events.model import Event, EventKey, Kind
from gateway.events.redis_streams import RedisStreams, origin_key, stream_name
from gateway.events.relay import Relay
from gateway.keys import EVENTS
from gateway.upstream import NodePool
from tests.fixtures.actors import RemoteActor, new_account
from tests.fixtures.events import (
    SseStream,
    bio_messages,
    commit_in_batches,
    event_ids,
    follow,
    gateway,
    sse,
)
from tests.fixtures.gwproc import GatewayProcess
from tests.fixtures.nodeproc import NodeProcess
from tests.fixtures.procs import free_port
from tests.fixtures.redisproc import RedisProcess


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisProcess]:
    proc = RedisProcess(tmp_path_factory.mktemp("redis")).start()
    yield proc
    proc.stop()


@pytest.fixture
async def redis(redis_server: RedisProcess) -> AsyncIterator[Redis]:
    client = Redis.from_url(redis_server.url)
    await client.flushall()
    yield client
    await client.aclose()


@pytest.fixture
def actor(node: NodeProcess) -> RemoteActor:
    with node.client() as c:
        return new_account(c, node.authority())


async def commit(node: NodeProcess, messages: list[pb.Message], batch: int) -> list[str]:
    def run() -> list[str]:
        with node.client() as c:
            return event_ids(commit_in_batches(c, messages, batch))

    return await asyncio.to_thread(run)


def kill(gw: GatewayProcess) -> None:
    if gw.proc is not None and gw.proc.poll() is None:
        gw.proc.kill()
        gw.proc.wait(10)


async def assert_quiet(stream: SseStream, seconds: float) -> None:
    """No event (comments aside) arrives within `seconds`."""
    with suppress(TimeoutError):
        async with asyncio.timeout(seconds):
            while True:
                ev = await stream.next(timeout=seconds + 1)
                assert ev is not None and ev.event == ":", f"unexpected event {ev}"


async def read_until_closed(stream: SseStream, timeout: float = 10.0) -> list[str]:
    ids: list[str] = []
    with suppress(aiohttp.ClientError, ConnectionError):
        while (ev := await stream.next(timeout=timeout)) is not None:
            if ev.id is not None:
                ids.append(ev.id)
    return ids


async def stream_entries(redis: Redis, kind: Kind) -> list[Event]:
    raw = await redis.xrange(stream_name(kind), "-", "+")
    return RedisStreams._events(kind, list(raw or []))


def assert_contiguous(entries: list[Event]) -> None:
    keys = [e.key for e in entries]
    assert keys == sorted(keys) and len(set(keys)) == len(keys)
    numbers = [e.event_id for e in entries]
    assert numbers == list(range(numbers[0], numbers[0] + len(numbers)))


async def test_two_gateways_one_redis_exactly_once_then_sigkill_and_resume(
    node: NodeProcess, redis_server: RedisProcess, redis: Redis, actor: RemoteActor
) -> None:
    flags = ("--redis-url", redis_server.url, "--sse-heartbeat", "1")
    a = GatewayProcess(node.grpc_target, args=flags).start()
    b = GatewayProcess(node.grpc_target, args=flags).start()
    try:
        async with (
            aiohttp.ClientSession() as s,
            sse(s, f"{b.url}/v1/events/messages") as on_b,
            sse(s, f"{b.url}/v1/events/blocks") as blocks_b,
        ):
            async with sse(s, f"{a.url}/v1/events/messages") as on_a:
                first = await commit(node, bio_messages(actor, 300, "one"), batch=50)
                assert len({i.split("-")[0] for i in first}) >= 6  # several blocks
                got_a, got_b = await asyncio.gather(on_a.events(300), on_b.events(300))
                assert [e.id for e in got_a] == first
                assert [e.id for e in got_b] == first
                assert got_a[0].data == got_b[0].data
                await asyncio.gather(assert_quiet(on_a, 0.5), assert_quiet(on_b, 0.5))

                kill(a)  # SIGKILL: no shutdown, the client just loses its connection
                assert await read_until_closed(on_a) == []

            second = await commit(node, bio_messages(actor, 100, "two"), batch=25)
            assert [e.id for e in await on_b.events(100)] == second

            a.start()  # restarted (on a new port): its relay resumes after what Redis holds
            async with (
                sse(s, f"{a.url}/v1/events/messages", last_event_id=first[-1]) as resumed,
                sse(s, f"{a.url}/v1/events/messages", last_event_id=first[99]) as older,
            ):
                assert [e.id for e in await resumed.events(100)] == second
                assert [e.id for e in await older.events(300)] == first[100:] + second
                third = await commit(node, bio_messages(actor, 20, "three"), batch=10)
                for stream in (resumed, older, on_b):
                    assert [e.id for e in await stream.events(20)] == third
                await asyncio.gather(*(assert_quiet(st, 0.5) for st in (resumed, older, on_b)))

            blocks_seen = [int(e.json()["header"]["number"]) for e in await blocks_b.events(3)]  # uint64: strings
            assert blocks_seen == sorted(blocks_seen) and len(set(blocks_seen)) == 3

            # Each event is in the Redis stream once, with its key as the id, in order.
            entries = await stream_entries(redis, Kind.MESSAGES)
            assert_contiguous(entries)
            in_redis = [str(e.key) for e in entries]
            assert set(first + second + third) <= set(in_redis)
            assert_contiguous(await stream_entries(redis, Kind.BLOCKS))

            # A gateway shutting down (SIGTERM) ends its open streams and exits promptly.
            started = time.monotonic()
            assert b.stop() == 0
            assert time.monotonic() - started < 10
            await read_until_closed(on_b)
    finally:
        kill(a)
        kill(b)


async def test_racing_relays_write_each_event_once(node: NodeProcess, redis: Redis, actor: RemoteActor) -> None:
    streams = RedisStreams(redis, 100_000)
    pools = [NodePool([node.grpc_target]) for _ in range(3)]
    relays = [Relay(kind, pool, streams) for pool in pools for kind in Kind]
    tasks = [asyncio.create_task(r.run()) for r in relays]
    try:
        deadline = time.monotonic() + 10
        while not (await redis.exists(origin_key(Kind.MESSAGES)) and await redis.exists(origin_key(Kind.BLOCKS))):
            assert time.monotonic() < deadline
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.3)  # every relay has read the (empty) stream and started from the same origin
        ids = await commit(node, bio_messages(actor, 200, "race"), batch=40)
        deadline = time.monotonic() + 20
        while True:
            entries = await stream_entries(redis, Kind.MESSAGES)
            if entries and str(entries[-1].key) == ids[-1]:
                break
            assert time.monotonic() < deadline, "the relays did not write every event"
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.3)  # let the slower relays try (and be refused)
        entries = await stream_entries(redis, Kind.MESSAGES)
        assert_contiguous(entries)
        assert [str(e.key) for e in entries][-200:] == ids
        message_relays = [r for r in relays if r.kind is Kind.MESSAGES]
        assert sum(r.written for r in message_relays) == len(entries)
        assert sum(r.duplicates for r in message_relays) == 2 * len(entries)
        assert_contiguous(await stream_entries(redis, Kind.BLOCKS))
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for pool in pools:
            await pool.close()

    # The same batch appended twice, concurrently: each id lands once.
    events = [Event(Kind.BLOCKS, EventKey(10**9 + i, 0), 10**9 + i, 0, b"", b"") for i in range(50)]
    results = await asyncio.gather(streams.append(events), streams.append(events))
    assert sum(results) == 50
    tail = await redis.xrange(stream_name(Kind.BLOCKS), f"{10**9}-0", "+")
    assert len(tail or []) == 50


async def test_resume_older_than_redis_falls_back_to_the_node(
    node: NodeProcess, redis_server: RedisProcess, redis: Redis, actor: RemoteActor
) -> None:
    await redis.config_set("stream-node-max-entries", 10)  # so that MAXLEN ~ trims close to the limit
    config = GatewayConfig(node_addrs=(node.grpc_target,), redis_url=redis_server.url, redis_stream_maxlen=50)
    async with gateway(config) as gw, aiohttp.ClientSession() as s:
        url = str(gw.make_url("/v1/events/messages"))
        history = gw.app[EVENTS].history
        assert isinstance(history, RedisHistory)
        async with sse(s, url) as live:
            ids = await commit(node, bio_messages(actor, 200, os.urandom(3).hex()), batch=40)
            assert [e.id for e in await live.events(200)] == ids
        entries = await stream_entries(redis, Kind.MESSAGES)
        assert len(entries) < 100 and entries[0].key > EventKey.parse(ids[0])
        async with sse(s, url, last_event_id=ids[0]) as old:
            assert [e.id for e in await old.events(199)] == ids[1:]
            assert history.fallbacks == 1
            more = await commit(node, bio_messages(actor, 5, "after"), batch=5)
            assert [e.id for e in await old.events(5)] == more
        async with sse(s, url, last_event_id=ids[-10]) as recent:
            assert [e.id for e in await recent.events(14)] == ids[-9:] + more
            assert history.fallbacks == 1  # served from Redis


async def test_node_and_redis_restarts_lose_nothing_for_a_client(tmp_path: Path) -> None:
    """The relay and the feed reconnect with backoff; a client that reconnects with its Last-Event-ID when
    told to (or when the stream ends) receives every event once and in order."""
    port = free_port()
    node = NodeProcess(tmp_path / "node", "--grpc-addr", f"127.0.0.1:{port}").start()
    redis_proc = RedisProcess(tmp_path / "redis").start()
    try:
        with node.client() as c:
            alice = new_account(c, node.authority())
        config = GatewayConfig(node_addrs=(node.grpc_target,), redis_url=redis_proc.url, sse_heartbeat=0.5)
        async with gateway(config) as gw, aiohttp.ClientSession() as s:
            url = str(gw.make_url("/v1/events/messages"))
            async with sse(s, url) as live:
                ids = await commit(node, bio_messages(alice, 20, "before"), batch=10)
                assert [e.id for e in await live.events(20)] == ids

            node.stop()
            node = NodeProcess(tmp_path / "node", "--grpc-addr", f"127.0.0.1:{port}").start()
            ids += await commit(node, bio_messages(alice, 20, "node-restarted"), batch=10)

            redis_proc.stop()  # no persistence: the restarted server is empty
            redis_proc.start(same_port=True)
            ids += await commit(node, bio_messages(alice, 20, "redis-restarted"), batch=10)
            await asyncio.sleep(0.5)
            ids += await commit(node, bio_messages(alice, 5, "later"), batch=5)

            got, _ = await follow(s, url, len(ids) - 20, last_event_id=ids[19], timeout=60)
            assert [e.id for e in got] == ids[20:]
    finally:
        node.stop()
        redis_proc.stop()
