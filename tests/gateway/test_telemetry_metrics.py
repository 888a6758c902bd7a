"""The gateway's Prometheus endpoint after a short workload: REST submissions and reads, an SSE client,
the relay into a real redis-server; every metric served with the values the workload implies."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterator

import aiohttp
import pytest
from aiohttp.test_utils import TestServer
from google.protobuf import json_format
from redis.asyncio import Redis

from gateway.app import build_app
from gateway.events.model import Kind
from gateway.events.redis_streams import stream_name
from gateway.telemetry import GatewayMetrics
from node.observability.metrics import MetricsEndpoint
from tests.fixtures.actors import RemoteActor
from tests.fixtures.events import sse
from tests.fixtures.nodeproc import NodeProcess
from tests.fixtures.redisproc import RedisProcess
from tests.fixtures.scrape import scrape, value
from tests.gateway.conftest import gateway_config


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisProcess]:
    proc = RedisProcess(tmp_path_factory.mktemp("redis")).start()
    yield proc
    proc.stop()


async def test_gateway_metrics_after_a_workload(node: NodeProcess, redis_server: RedisProcess):
    redis = Redis.from_url(redis_server.url)
    await redis.flushall()
    endpoint = MetricsEndpoint("chain-gateway", "127.0.0.1:0")
    port = endpoint.start()
    server = TestServer(build_app(gateway_config(node, redis_url=redis_server.url), GatewayMetrics(endpoint)))
    await server.start_server()
    http: Counter[tuple[str, str, int, str]] = Counter()  # (method, route, status, reason code) as sent here

    async def call(s: aiohttp.ClientSession, method: str, route: str, path: str, **kw: object) -> dict[str, object]:
        async with s.request(method, str(server.make_url(path)), **kw) as resp:  # type: ignore[arg-type]
            body = await resp.json() if resp.content_type == "application/json" else {}
            code = body.get("error", {}).get("code", "") if resp.status >= 400 else ""
            http[method, route, resp.status, code] += 1
            return {"status": resp.status, **body}

    try:
        async with aiohttp.ClientSession() as s, sse(s, str(server.make_url("/v1/events/blocks"))) as live:
            msgs = [(a := RemoteActor()).b.signer_add(a.wallet, 0) for _ in range(3)]
            for msg in msgs:
                got = await call(s, "POST", "/v1/messages", "/v1/messages", json=json_format.MessageToDict(msg))
                assert got["status"] == 202, got
            assert (await call(s, "POST", "/v1/messages", "/v1/messages", json={"data": 5}))["status"] == 400
            assert (await call(s, "GET", "unmatched", "/v1/nowhere"))["status"] == 404
            last_block = 0
            for msg in msgs:
                for _ in range(200):
                    got = await call(s, "GET", "/v1/messages/{hash}", f"/v1/messages/0x{msg.hash.hex()}")
                    if got["status"] == 200:
                        last_block = max(last_block, int(str(got["block_number"])))
                        break
                    await asyncio.sleep(0.05)
            account = f"/v1/accounts/0x{bytes(20).hex()}"
            for _ in range(2):  # the second answer is the first's bytes: its body is remembered
                assert (await call(s, "GET", "/v1/accounts/{ownerAddress}", account))["status"] == 200
            again = await call(s, "POST", "/v1/messages", "/v1/messages", json=json_format.MessageToDict(msgs[0]))
            assert again["status"] == 409, again  # committed already: the node refuses it with its reason
            while int(str((await live.events(1, kind="block"))[0].id).split("-")[0]) < last_block:
                pass
            before = {k: await redis.xlen(stream_name(k)) for k in Kind}
            m = scrape(port)
            after = {k: await redis.xlen(stream_name(k)) for k in Kind}
    finally:
        await server.close()
        endpoint.stop()
        await redis.aclose()

    for (method, route, status, reason), n in http.items():
        count = value(
            m,
            "http_server_request_duration_seconds_count",
            http_request_method=method,
            http_route=route,
            http_response_status_code=status,
            chain_reason_code=reason,
        )
        assert count == n, (method, route, status, reason, count, n)
    assert {reason for (_m, _r, _s, reason) in http} >= {"", "INVALID_ARGUMENT", "NOT_FOUND"}
    assert value(m, "chain_sse_clients", chain_stream_kind="blocks") == 1  # open while scraped
    assert value(m, "chain_sse_clients", chain_stream_kind="messages") == 0
    assert value(m, "chain_sse_clients_dropped_total") == 0
    # REST bodies made: the three messages' and the account's first; the account's second was remembered
    assert value(m, "chain_rest_memo_lookups_total", chain_memo_result="miss") == 4
    assert value(m, "chain_rest_memo_lookups_total", chain_memo_result="hit") == 1
    assert value(m, "chain_rest_memo_size_bytes") > 0
    written = value(m, "chain_relay_events_total", chain_relay_result="written")
    assert sum(before.values()) <= written <= sum(after.values())  # every entry in Redis, written by this relay
    lag_count = value(m, "chain_relay_lag_seconds_count")
    assert before[Kind.BLOCKS] <= lag_count <= after[Kind.BLOCKS]
    assert lag_count >= 1 and 0 <= value(m, "chain_relay_lag_seconds_sum") / lag_count < 5
