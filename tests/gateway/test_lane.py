"""The REST reads' lane (gateway/rest/lane.py): it takes exactly the GETs aiohttp would route to a REST read,
and answers them as the app does.

- Its pick against aiohttp's own router, over every route of the gateway filled with several values and a
  seeded random walk of paths around them.
- Its answers against the app's own, over real sockets: one app served through the lane, one without it,
  the same node, the same requests (found, not found, refused, a fixed path, CORS), status, headers and body.
- Its gates, each by what the app answers when the lane is bypassed: a fixed path that serves no GET (405),
  an escaped `/` in a value, an `Expect: 100-continue` header, a middleware it does not know (run, or the
  lane off).
"""

from __future__ import annotations

import asyncio
import random
import re
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer, make_mocked_request
from aiohttp.web_urldispatcher import MatchInfoError

from gateway.app import build_app
from gateway.config import GatewayConfig
from gateway.errors import Handler
from gateway.rest.lane import Lane
from gateway.rest.routes import ROUTES, install_rest_lane
from tests.fixtures.actors import new_account
from tests.fixtures.nodeproc import NodeProcess
from tests.gateway.conftest import ORIGIN, gateway_config

READS = {r.name for r in ROUTES if r.method == "GET" and r.body is None}
ADDRESS = "0x" + "ab" * 20
VALUES = (ADDRESS, "abc", "batch", "search", "1", "%41", "a%2Fb", "a%25b")
SEGMENTS = ("v1", "accounts", "projects", "messages", "blocks", "batch", "dry-run", "keys", "custody-keys",
            "refs", "log", "events", "node", "status", "search", "proofs", "verify", ADDRESS, "abc", "1", "",
            "%41", "a%2Fb", "openapi.json")  # fmt: skip


async def routed(app: web.Application, path: str) -> tuple[Any, dict[str, str]]:
    """aiohttp's own route for a GET of `path` (None when it has none) and the values it matched."""
    match = await app.router.resolve(make_mocked_request("GET", path, app=app))
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
async def runner() -> AsyncIterator[web.AppRunner]:
    app = build_app(GatewayConfig(node_addrs=("127.0.0.1:1",), cors_origins=(ORIGIN,)))
    run = web.AppRunner(app)
    await run.setup()
    yield run
    await run.cleanup()


async def test_the_lane_takes_what_the_router_routes_to_a_rest_read(runner: web.AppRunner):
    app = runner.app
    lane = install_rest_lane(runner, app)
    assert lane.on
    taken: set[str] = set()
    for path in sorted(paths_around(app)):
        route, values = await routed(app, path)
        safe = make_mocked_request("GET", path).rel_url.path_safe
        picked = lane.pick("GET", safe)
        if picked is not None:
            candidate, lane_values = picked
            assert candidate.route is route, (path, candidate.route, route)
            assert lane_values == values, path
            name = str(candidate.route.name if candidate.route is not None else None)
            assert name in READS, path
            taken.add(name)
        elif route is not None and route.name in READS:
            # left to the app: only for a value that needs unquoting, or a fixed path that serves no GET
            assert "%" in safe or path in ("/v1/messages/batch", "/v1/messages/dry-run"), path
        assert lane.pick("POST", safe) is None and lane.pick("HEAD", safe) is None
    assert taken == READS  # every REST read was taken somewhere in the walk


def test_a_middleware_the_lane_does_not_know_turns_it_off():
    async def old_style(app: web.Application, handler: Any) -> Any:  # the pre-3.0 factory form
        return handler

    app = web.Application(middlewares=[old_style])  # type: ignore[list-item]
    assert not Lane.build(app, {"x"}, {}).on


async def served(app: web.Application, lane: bool) -> tuple[TestServer, Lane | None]:
    server = TestServer(app)
    await server.start_server()
    assert server.runner is not None
    return server, (install_rest_lane(server.runner, app) if lane else None)


async def get(server: TestServer, path: str, headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
    async with aiohttp.ClientSession() as s, s.get(str(server.make_url(path)), headers=headers) as resp:
        kept = {k: v for k, v in resp.headers.items() if k != "Date"}
        return resp.status, kept, await resp.read()


async def test_the_lane_answers_as_the_app_does(node: NodeProcess):
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
        "/v1/accounts/0xab%2Fcd": 400,  # an escaped "/" in the value: left to the app
        "/v1/projects/0x" + "00" * 32: 404,
        "/v1/blocks/1": 200,
        "/v1/messages/batch": 405,  # a fixed path that serves POST only: left to the app
        "/v1/nowhere": 404,
    }
    lane_app = build_app(gateway_config(node))
    plain_app = build_app(gateway_config(node))
    with_lane, lane = await served(lane_app, True)
    without, _ = await served(plain_app, False)
    try:
        for path, status in cases.items():
            for headers in ({}, {"Origin": ORIGIN}):
                a = await get(with_lane, path, headers)
                b = await get(without, path, headers)
                assert a == b, (path, headers, a, b)
                assert a[0] == status, (path, a)
        assert lane is not None and lane.taken == 2 * 9  # the nine REST reads the lane may take, twice
        assert (await get(with_lane, owner, {"Origin": ORIGIN}))[1]["Access-Control-Allow-Origin"] == ORIGIN
    finally:
        await with_lane.close()
        await without.close()


async def test_expect_100_continue_is_answered_before_the_read(node: NodeProcess):
    """aiohttp sends `100 Continue` for a request with `Expect: 100-continue` before calling its handler;
    the lane leaves such a request to the app."""
    server, lane = await served(build_app(gateway_config(node)), True)
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        head = f"GET /v1/accounts/{ADDRESS} HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nConnection: close\r\n"
        writer.write(head.encode() + b"\r\n")
        answer = await asyncio.wait_for(reader.read(), 10)
        writer.close()
        assert answer.startswith(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 "), answer[:80]
        assert lane is not None and lane.taken == 0
    finally:
        await server.close()


async def test_every_middleware_the_app_has_runs_for_the_lane(node: NodeProcess):
    """A middleware added by someone else (tracing's, say) runs for what the lane takes; the inert ones do not."""
    seen: list[str] = []

    @web.middleware
    async def watch(request: web.Request, handler: Handler) -> web.StreamResponse:
        seen.append(request.path)
        return await handler(request)

    app = build_app(gateway_config(node))
    app.middlewares.append(watch)
    server, lane = await served(app, True)
    try:
        status, _, _ = await get(server, f"/v1/accounts/{ADDRESS}", {})
        assert status == 200
        assert lane is not None and lane.taken == 1
        assert seen == [f"/v1/accounts/{ADDRESS}"]
    finally:
        await server.close()
