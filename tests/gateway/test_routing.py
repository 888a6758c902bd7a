"""REST routing on aiohttp's own router: every REST route is reached by its paths, a fixed path answers the
methods it does not serve with 405, and the app's answers go through every middleware it has.

- aiohttp's router over every route of the gateway filled with several values and a seeded random walk of
  paths around them: each REST read is reached, and a fixed path that serves no GET is refused, not routed
  to the template that matches the same text (`GET /v1/messages/batch` is not `getMessage`).
- Answers over real sockets (found, not found, refused, a fixed path, CORS): status, headers and body.
- `Expect: 100-continue` is answered before the read; a middleware added by someone else runs.
"""

from __future__ import annotations

import asyncio
import random
import re
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from aiohttp import hdrs, web
from aiohttp.test_utils import TestServer, make_mocked_request
from aiohttp.web_urldispatcher import MatchInfoError

from gateway.app import build_app
from gateway.config import GatewayConfig
from gateway.errors import Handler
from gateway.rest.routes import FIXED, ROUTES
from tests.fixtures.actors import new_account
from tests.fixtures.nodeproc import NodeProcess
from tests.gateway.conftest import ORIGIN, gateway_config

READS = {r.name for r in ROUTES if r.method == "GET" and r.body is None}
ADDRESS = "0x" + "ab" * 20
VALUES = (ADDRESS, "abc", "batch", "search", "1", "%41", "a%2Fb", "a%25b")
SEGMENTS = ("v1", "accounts", "projects", "messages", "blocks", "batch", "dry-run", "keys", "custody-keys",
            "refs", "log", "events", "node", "status", "search", "proofs", "verify", ADDRESS, "abc", "1", "",
            "%41", "a%2Fb", "openapi.json")  # fmt: skip


async def routed(app: web.Application, method: str, path: str) -> tuple[Any, dict[str, str]]:
    """aiohttp's route for a `method` request of `path` (None when it has none) and the values it matched."""
    match = await app.router.resolve(make_mocked_request(method, path, app=app))
    if isinstance(match, MatchInfoError):
        return None, {}
    return match.route, dict(match)


def paths_around(app: web.Application) -> set[str]:
    out: set[str] = set()
    for resource in app.router.resources():
        for value in VALUES:
            filled = re.sub(r"\{[^}]+\}", value, resource.canonical)  # the values have no backslash
            out |= {filled, filled + "/", filled + "/x"}
    rng = random.Random(7)
    for _ in range(1500):
        out.add("/" + "/".join(rng.choice(SEGMENTS) for _ in range(rng.randint(0, 6))))
    return out


@pytest.fixture
async def app() -> AsyncIterator[web.Application]:
    runner = web.AppRunner(build_app(GatewayConfig(node_addrs=("127.0.0.1:1",), cors_origins=(ORIGIN,))))
    await runner.setup()
    yield runner.app
    await runner.cleanup()


async def test_the_router_reaches_every_rest_read_and_refuses_a_fixed_path(app: web.Application):
    reached: set[str] = set()
    for path in sorted(paths_around(app)):
        route, values = await routed(app, "GET", path)
        if route is None:
            continue
        if path in FIXED:  # a fixed path's own GET, or its refusal: never a template's
            assert route.name in READS if hdrs.METH_GET in FIXED[path] else route.method == hdrs.METH_ANY, path
        if route.name in READS:
            reached.add(route.name)
            assert set(values) == set(re.findall(r"\{([^}]+)\}", route.resource.canonical)), path
    assert reached == READS  # every REST read was reached somewhere in the walk


async def test_a_fixed_path_is_refused_before_a_template_matches_it(app: web.Application):
    """`/v1/messages/batch` serves POST; a GET of it is 405, not `getMessage` of the hash "batch"."""
    route, _ = await routed(app, "GET", "/v1/messages/batch")
    assert route is not None and route.method == hdrs.METH_ANY and route.name is None
    route, values = await routed(app, "GET", "/v1/messages/batchx")
    assert route is not None and route.name == "rest.getMessage" and values == {"hash": "batchx"}
    route, _ = await routed(app, "POST", "/v1/messages/batch")
    assert route is not None and route.name == "rest.batchSubmitMessages"
    route, _ = await routed(app, "POST", "/v1/messages")  # the path's second resource, not the refusal
    assert route is not None and route.name == "rest.submitMessage"


async def served(app: web.Application) -> TestServer:
    server = TestServer(app)
    await server.start_server()
    return server


async def get(server: TestServer, path: str, headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
    async with aiohttp.ClientSession() as s, s.get(str(server.make_url(path)), headers=headers) as resp:
        kept = {k: v for k, v in resp.headers.items() if k != "Date"}
        return resp.status, kept, await resp.read()


async def test_the_rest_reads_answer(node: NodeProcess):
    actor = new_account(node.client(), node.authority())
    owner = f"/v1/accounts/0x{actor.address.hex()}"
    cases = {
        owner: 200,
        owner + "/keys": 200,
        owner + "/custody-keys?limit=1": 200,
        owner + "/activity?limit=abc": 400,  # refused by the compiled parameter check
        f"/v1/accounts/{ADDRESS}": 200,  # an account never seen: its empty row
        "/v1/messages/0x" + "00" * 32: 404,  # the node's NOT_FOUND, mapped by the error middleware
        "/v1/accounts/0xzz": 400,
        "/v1/accounts/0xab%2Fcd": 400,  # an escaped "/" in the value
        "/v1/projects/0x" + "00" * 32: 404,
        "/v1/blocks/1": 200,
        "/v1/messages/batch": 405,  # a fixed path that serves POST only
        "/v1/nowhere": 404,
    }
    one, two = await served(build_app(gateway_config(node))), await served(build_app(gateway_config(node)))
    try:
        for path, status in cases.items():
            for headers in ({}, {"Origin": ORIGIN}):
                a = await get(one, path, headers)
                b = await get(two, path, headers)
                assert a == b, (path, headers, a, b)
                assert a[0] == status, (path, a)
        assert (await get(one, owner, {"Origin": ORIGIN}))[1]["Access-Control-Allow-Origin"] == ORIGIN
        status, headers, body = await get(one, "/v1/messages/batch", {})
        assert headers["Allow"] == "POST" and b'"METHOD_NOT_ALLOWED"' in body
    finally:
        await one.close()
        await two.close()


async def test_expect_100_continue_is_answered_before_the_read(node: NodeProcess):
    """aiohttp sends `100 Continue` for a request with `Expect: 100-continue` before calling its handler."""
    server = await served(build_app(gateway_config(node)))
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        head = f"GET /v1/accounts/{ADDRESS} HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nConnection: close\r\n"
        writer.write(head.encode() + b"\r\n")
        answer = await asyncio.wait_for(reader.read(), 10)
        writer.close()
        assert answer.startswith(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 "), answer[:80]
    finally:
        await server.close()


async def test_every_middleware_the_app_has_runs_for_a_rest_read(node: NodeProcess):
    """A middleware added by someone else (tracing's, say) runs for a REST read."""
    seen: list[str] = []

    @web.middleware
    async def watch(request: web.Request, handler: Handler) -> web.StreamResponse:
        seen.append(request.path)
        return await handler(request)

    app = build_app(gateway_config(node))
    app.middlewares.append(watch)
    server = await served(app)
    try:
        status, _, _ = await get(server, f"/v1/accounts/{ADDRESS}", {})
        assert status == 200
        assert seen == [f"/v1/accounts/{ADDRESS}"]
    finally:
        await server.close()
