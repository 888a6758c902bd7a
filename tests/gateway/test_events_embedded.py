"""SSE without Redis: the gateway (in-process, a real aiohttp server) relays the node's streams itself.

One real chain-node subprocess (the `node` fixture of tests/gateway/conftest.py) serves every test of the
module; each test makes its own account and reads only what it commits after its streams are open.
"""

from __future__ import annotations

import asyncio
import os
import socket
import time
from collections.abc import AsyncIterator
from dataclasses import replace

import aiohttp
import pytest
from aiohttp.test_utils import TestServer

from chain.v1 import block_pb2
from chain.v1 import message_pb2 as pb
from gateway.app import build_app
from gateway.config import GatewayConfig
from gateway.events.model import Event, EventKey, Kind
from gateway.keys import EVENTS
from tests.fixtures.actors import RemoteActor, new_account
from tests.fixtures.events import bio_messages, commit_in_batches, event_ids, gateway, sse
from tests.fixtures.nodeproc import NodeProcess


@pytest.fixture
def actor(node: NodeProcess) -> RemoteActor:
    with node.client() as c:
        return new_account(c, node.authority())


def config_for(node: NodeProcess, **kw: object) -> GatewayConfig:
    return replace(GatewayConfig(node_addrs=(node.grpc_target,), sse_heartbeat=5.0), **kw)  # type: ignore[arg-type]


async def commit(node: NodeProcess, messages: list[pb.Message], batch: int = 10) -> list[str]:
    def run() -> list[str]:
        with node.client() as c:
            return event_ids(commit_in_batches(c, messages, batch))

    return await asyncio.to_thread(run)


def project_messages(actor: RemoteActor, n: int) -> tuple[bytes, list[pb.Message]]:
    create = actor.b.project_create(f"p-{os.urandom(4).hex()}")
    pid = bytes(create.hash)
    updates = [actor.b.project_metadata(pid, pb.PROJECT_FIELD_DESCRIPTION, f"d{i}") for i in range(n)]
    return pid, [create, *updates]


def bundles(actor: RemoteActor, pid: bytes, n: int, commits: int) -> list[pb.Message]:
    out = []
    for i in range(n):
        metas = [
            pb.CommitMeta(hash=os.urandom(32), tree_hash=os.urandom(32), title=f"commit {i}.{j} " + "x" * 100)
            for j in range(commits)
        ]
        out.append(actor.b.commit_bundle(pid, metas))
    return out


async def test_live_then_resume_by_header_query_and_from_block(node: NodeProcess, actor: RemoteActor) -> None:
    async with gateway(config_for(node)) as gw, aiohttp.ClientSession() as s:
        url = str(gw.make_url("/v1/events/messages"))
        async with sse(s, url) as live, sse(s, str(gw.make_url("/v1/events/blocks"))) as blocks:
            ids = await commit(node, bio_messages(actor, 40), batch=8)
            got = await live.events(40, kind="message")
            assert [e.id for e in got] == ids
            first = got[0].json()
            assert first["message"]["data"]["type"] == "account_data"
            assert first["message"]["data"]["owner_address"] == "0x" + actor.address.hex()
            assert f"{first['block_number']}-{first['index']}" == got[0].id
            block_numbers = sorted({int(i.split("-")[0]) for i in ids})
            seen_blocks: list[int] = []
            while not seen_blocks or seen_blocks[-1] < block_numbers[-1]:
                (b,) = await blocks.events(1, kind="block")
                n = int(b.json()["header"]["number"])
                assert b.id == f"{n}-0"
                seen_blocks.append(n)
            assert set(block_numbers) <= set(seen_blocks)
            assert seen_blocks == list(range(seen_blocks[0], seen_blocks[-1] + 1))

        # Resume: the header, the query parameter, from_block; history then live, no gap, no duplicate.
        async with sse(s, url, last_event_id=ids[9]) as r1, sse(s, url + f"?last_event_id={ids[29]}") as r2:
            assert [e.id for e in await r1.events(30)] == ids[10:]
            assert [e.id for e in await r2.events(10)] == ids[30:]
            more = await commit(node, bio_messages(actor, 5, "more"))
            assert [e.id for e in await r1.events(5)] == more
            assert [e.id for e in await r2.events(5)] == more
        first_block = int(ids[0].split("-")[0])
        async with sse(s, url + f"?from_block={first_block}") as r3:
            assert [e.id for e in await r3.events(45)] == ids + more
        block_url = str(gw.make_url("/v1/events/blocks"))
        async with sse(s, block_url, last_event_id=f"{seen_blocks[0]}-0") as rb:
            block_ids = [e.id for e in await rb.events(len(seen_blocks) - 1)]
            assert block_ids == [f"{n}-0" for n in seen_blocks[1:]]


async def test_filters_by_project_and_type(node: NodeProcess, actor: RemoteActor) -> None:
    pid, messages = project_messages(actor, 6)
    noise = bio_messages(actor, 7, "noise")
    mixed = [m for pair in zip(messages, noise, strict=True) for m in pair]
    async with gateway(config_for(node)) as gw, aiohttp.ClientSession() as s:
        url = str(gw.make_url("/v1/events/messages"))
        async with (
            sse(s, f"{url}?project_id=0x{pid.hex()}") as by_project,
            sse(s, f"{url}?types=PROJECT_METADATA") as by_type,
            sse(s, f"{url}?types=MESSAGE_TYPE_PROJECT_CREATE,account_data&project_id={pid.hex()}") as both,
        ):
            ids = await commit(node, mixed, batch=4)
            by_id = dict(zip([bytes(m.hash) for m in mixed], ids, strict=True))
            project_ids = [by_id[bytes(m.hash)] for m in messages]
            got = await by_project.events(7)
            assert [e.id for e in got] == project_ids
            got = await by_type.events(6)
            assert [e.id for e in got] == project_ids[1:]
            assert {e.json()["message"]["data"]["type"] for e in got} == {"project_metadata"}
            (only,) = await both.events(1)
            assert only.id == project_ids[0]
            assert only.json()["message"]["data"]["type"] == "project_create"
            tail = await commit(node, [actor.b.project_metadata(pid, pb.PROJECT_FIELD_WEBSITE, "https://x.test")])
            assert [e.id for e in await by_project.events(1)] == tail
        # A resume with filters: history is filtered the same way.
        async with sse(s, f"{url}?types=PROJECT_METADATA&project_id=0x{pid.hex()}", last_event_id=ids[0]) as r:
            assert [e.id for e in await r.events(7)] == [*project_ids[1:], *tail]
        for bad in ("types=NOPE", "project_id=0x1234", "project_id=zz", "last_event_id=abc", "from_block=-1"):
            async with s.get(f"{url}?{bad}") as resp:
                assert resp.status == 400, bad
                body = await resp.json()
                assert body["error"]["code"] == "INVALID_ARGUMENT"
        async with s.get(str(gw.make_url("/v1/events/blocks?types=COMMIT_BUNDLE"))) as resp:
            assert resp.status == 400


async def test_heartbeats_while_idle(node: NodeProcess) -> None:
    async with (
        gateway(config_for(node, sse_heartbeat=0.2)) as gw,
        aiohttp.ClientSession() as s,
        sse(s, str(gw.make_url("/v1/events/blocks"))) as stream,
    ):
        started = time.monotonic()
        pings = 0
        while pings < 3:
            ev = await stream.next(timeout=2.0)
            assert ev is not None
            if ev.event == ":":
                assert ev.data == "ping"
                pings += 1
        assert time.monotonic() - started < 2.0


async def test_per_ip_limit_answers_429(node: NodeProcess) -> None:
    async with gateway(config_for(node, sse_max_per_ip=2, sse_heartbeat=0.2)) as gw, aiohttp.ClientSession() as s:
        url = str(gw.make_url("/v1/events/messages"))
        async with sse(s, url), sse(s, str(gw.make_url("/v1/events/blocks"))), s.get(url) as resp:
            assert resp.status == 429
            assert (await resp.json())["error"]["code"] == "RESOURCE_EXHAUSTED"
        # Both closed: the slots are free again once the server has seen the disconnects.
        deadline = time.monotonic() + 5
        while True:
            async with s.get(url) as resp:
                if resp.status == 200:
                    break
                assert resp.status == 429
            assert time.monotonic() < deadline, "the per-IP slots were not released"
            await asyncio.sleep(0.1)


async def test_head_answers_the_stream_headers_and_ends(node: NodeProcess) -> None:
    """HEAD of an event stream: the GET's status and headers, then the answer ends (it holds no stream slot
    and the keep-alive connection takes the next request)."""
    async with gateway(config_for(node, sse_max_per_ip=1)) as gw, aiohttp.ClientSession() as s:
        url = str(gw.make_url("/v1/events/blocks"))
        for _ in range(3):  # one connection, kept alive between them
            async with s.head(url, timeout=aiohttp.ClientTimeout(total=5)) as resp:
                assert resp.status == 200 and resp.headers["Content-Type"] == "text/event-stream"
                assert await resp.read() == b""
        async with sse(s, url):  # the one slot is free
            pass
        async with s.head(
            str(gw.make_url("/v1/events/blocks?from_block=x")), timeout=aiohttp.ClientTimeout(total=5)
        ) as bad:
            assert bad.status == 400  # the GET's refusal, without its body


def port_of(server: TestServer) -> int:
    assert server.port is not None
    return server.port


def stalled_client(port: int, path: str) -> socket.socket:
    """An SSE client that sends its request and never reads (tiny receive buffer)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n".encode())
    return sock


async def wait_for(predicate: object, timeout: float, what: str) -> None:
    assert callable(predicate)
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.05)


async def test_slow_client_is_cut_off_and_others_keep_receiving(node: NodeProcess, actor: RemoteActor) -> None:
    with node.client() as c:
        create = actor.b.project_create(f"slow-{os.urandom(4).hex()}")
        c.commit(create)
    pid = bytes(create.hash)
    config = config_for(node, sse_queue=16, sse_heartbeat=0.5)
    async with gateway(config) as gw, aiohttp.ClientSession() as s:
        service = gw.app[EVENTS]
        hub = service.hubs[Kind.MESSAGES]
        async with sse(s, str(gw.make_url("/v1/events/messages"))) as fast:
            slow = await asyncio.to_thread(stalled_client, port_of(gw), "/v1/events/messages")
            try:
                await wait_for(lambda: len(hub) == 2, 5, "the stalled client did not subscribe")
                # ~40 bundles of ~10 KB JSON each: far more than the socket buffers and the queue hold
                messages = bundles(actor, pid, 40, 30)
                ids = await commit(node, messages, batch=4)
                got = await fast.events(len(ids), timeout=60)
                assert [e.id for e in got] == ids
                await wait_for(lambda: len(hub) == 1, 10, "the stalled client was not cut off")
                assert hub.dropped >= 1
                assert service.limiter.open.get("127.0.0.1") == 1
                # the fast client still receives
                more = await commit(node, bio_messages(actor, 3))
                assert [e.id for e in await fast.events(3)] == more
            finally:
                slow.close()


async def test_clean_shutdown_ends_every_stream(node: NodeProcess, actor: RemoteActor) -> None:
    with node.client() as c:
        create = actor.b.project_create(f"down-{os.urandom(4).hex()}")
        c.commit(create)
    config = config_for(node, sse_queue=10_000, sse_heartbeat=30.0)
    gw = TestServer(build_app(config), host="127.0.0.1")
    await gw.start_server()
    service = gw.app[EVENTS]
    closed = False
    try:
        async with aiohttp.ClientSession() as s:
            url = str(gw.make_url("/v1/events/messages"))
            async with sse(s, url) as idle, sse(s, str(gw.make_url("/v1/events/blocks"))) as blocks:
                slow = await asyncio.to_thread(stalled_client, port_of(gw), "/v1/events/messages")
                try:
                    await wait_for(lambda: len(service.hubs[Kind.MESSAGES]) == 2, 5, "not subscribed")
                    # a stalled client blocked in a write must not hold the shutdown up
                    await commit(node, bundles(actor, bytes(create.hash), 20, 30), batch=4)
                    await idle.events(20, timeout=30)
                    started = time.monotonic()
                    await gw.close()
                    closed = True
                    assert time.monotonic() - started < 5.0
                    for stream in (idle, blocks):
                        while (ev := await stream.next(timeout=5)) is not None:
                            assert ev.event in (":", "message", "block")
                finally:
                    slow.close()
        assert all(t.done() for t in service._tasks) or not service._tasks
    finally:
        if not closed:
            await gw.close()


class GatedHistory:
    """History that sends `before` events, then waits for `gate` before the rest."""

    def __init__(self, n: int, before: int) -> None:
        self.n = n
        self.before = before
        self.gate = asyncio.Event()
        self.waiting = asyncio.Event()

    async def pages(self, kind: Kind, after: EventKey, until: EventKey) -> AsyncIterator[list[Event]]:
        events = []
        for i in range(self.n):
            m = block_pb2.CommittedMessage(block_number=1, index=i, event_id=i + 1)
            events.append(Event(Kind.MESSAGES, EventKey(1, i), i + 1, 0, b"", m.SerializeToString()))
        yield [e for e in events[: self.before] if after < e.key <= until]
        self.waiting.set()
        await self.gate.wait()
        yield [e for e in events[self.before :] if after < e.key <= until]


async def test_a_client_that_overflows_during_history_never_skips_ahead(node: NodeProcess, actor: RemoteActor) -> None:
    """Live events queue up while history is sent; if the queue overflows first, the stream ends after the
    history already sent (never with live events past a gap), telling the client where to resume."""
    async with gateway(config_for(node, sse_queue=4)) as gw, aiohttp.ClientSession() as s:
        service = gw.app[EVENTS]
        hub = service.hubs[Kind.MESSAGES]
        history = GatedHistory(10, before=3)
        service.history = history
        await asyncio.wait_for(hub.ready.wait(), 10)
        assert hub.position > EventKey(1, 9)  # the actor's account is in a block; the fake history is block 1
        async with sse(s, str(gw.make_url("/v1/events/messages")), last_event_id="0-0") as stream:
            first = await stream.events(3)
            assert [e.id for e in first] == ["1-0", "1-1", "1-2"]
            await history.waiting.wait()
            for i in range(6):  # more than the queue holds
                m = block_pb2.CommittedMessage(block_number=10**6, index=i, event_id=10**6 + i)
                hub.publish(Event(Kind.MESSAGES, EventKey(10**6, i), 10**6 + i, 0, b"", m.SerializeToString()))
            assert hub.dropped == 1
            history.gate.set()
            end = await stream.next()
            assert end is not None and end.event == "error", end
            error = end.json()["error"]
            assert error["code"] == "RESOURCE_EXHAUSTED"
            assert error["details"] == {"reason": "SLOW_SUBSCRIBER", "last_event_id": "1-2"}
            assert await stream.next() is None
