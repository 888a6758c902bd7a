"""The gateway's lean access logger writes the line aiohttp's own `AccessLogger` writes (default format),
for real requests to an app served on loopback, and defers to aiohttp's logger for any other format."""

from __future__ import annotations

import asyncio
import io
import logging
import re
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from aiohttp.web_log import AccessLogger

from gateway.accesslog import LeanAccessLogger
from node.observability.logs import configure_logging

STAMP = re.compile(r"\[\d\d/\w{3}/\d{4}:\d\d:\d\d:\d\d [+-]\d{4}\]")


def app() -> web.Application:
    async def hello(request: web.Request) -> web.Response:
        return web.json_response({"hello": request.match_info["who"]}, status=201)

    out = web.Application()
    out.router.add_get("/v1/hello/{who}", hello)
    return out


async def lines(caplog: pytest.LogCaptureFixture, cls: type, **runner: Any) -> list[str]:
    """The access log lines of three requests to an app served on loopback with this access log class."""
    caplog.clear()
    server = TestServer(app(), host="127.0.0.1")
    await server.start_server(access_log_class=cls, **runner)
    headers = {"Referer": "http://app.test/page", "User-Agent": "probe/1.0 (é)"}
    with caplog.at_level(logging.INFO, logger="aiohttp.access"):
        async with TestClient(server) as client:
            for path in ("/v1/hello/a?x=1&y=%20", "/v1/nowhere"):
                await (await client.get(path, headers=headers)).read()
            await (await client.get("/v1/hello/b")).read()
    records = [r for r in caplog.records if r.name == "aiohttp.access"]
    expected_module = "accesslog" if cls is LeanAccessLogger and not runner else "web_log"
    assert {r.module for r in records} == {expected_module}  # the class under test wrote them
    return [r.getMessage() for r in records]


async def test_same_line_as_aiohttp(caplog: pytest.LogCaptureFixture) -> None:
    ours = await lines(caplog, LeanAccessLogger)
    theirs = await lines(caplog, AccessLogger)
    assert len(ours) == 3
    assert all(STAMP.search(line) for line in ours)
    assert [STAMP.sub("T", line) for line in ours] == [STAMP.sub("T", line) for line in theirs]
    assert '"GET /v1/hello/a?x=1&y=%20 HTTP/1.1" 201' in ours[0]
    assert ours[2].endswith('"-" "' + theirs[2].rsplit('"', 2)[-2] + '"')


async def test_other_formats_are_aiohttp_s(caplog: pytest.LogCaptureFixture) -> None:
    ours = await lines(caplog, LeanAccessLogger, access_log_format="%s %r")
    assert ours[0] == "201 GET /v1/hello/a?x=1&y=%20 HTTP/1.1"


async def test_lines_reach_the_configured_handler_without_records(
    caplog: pytest.LogCaptureFixture, root_handlers: None
) -> None:
    """Logging set up as the gateway sets it up (one handler, nothing else): the same lines, written by the
    handler without a LogRecord made for any of them (a capture, as in the tests above, gets records)."""
    theirs = await lines(caplog, AccessLogger)
    out = io.StringIO()
    configure_logging("info", "text", out)  # replaces the root's handlers (the capture's too) with its one
    made: list[str] = []
    factory = logging.getLogRecordFactory()

    def counting(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = factory(*args, **kwargs)
        made.append(record.name)
        return record

    logging.setLogRecordFactory(counting)
    try:
        server = TestServer(app(), host="127.0.0.1")
        await server.start_server(access_log_class=LeanAccessLogger)
        headers = {"Referer": "http://app.test/page", "User-Agent": "probe/1.0 (é)"}
        async with TestClient(server) as client:
            for path in ("/v1/hello/a?x=1&y=%20", "/v1/nowhere"):
                await (await client.get(path, headers=headers)).read()
            await (await client.get("/v1/hello/b")).read()
    finally:
        logging.setLogRecordFactory(factory)
    assert "aiohttp.access" not in made
    written = [line for line in out.getvalue().splitlines() if " INFO aiohttp.access " in line]
    assert [STAMP.sub("T", line.split(" INFO aiohttp.access ", 1)[1]) for line in written] == [
        STAMP.sub("T", line) for line in theirs
    ]


async def test_the_target_is_logged_as_the_client_sent_it(caplog: pytest.LogCaptureFixture) -> None:
    """The line's target is the request's own (`raw_path`): an absolute-form target and a trailing `?` stay
    as sent, where aiohttp's `path_qs` would log `/v1/hello/c` and `/v1/hello/d`."""
    targets = ["http://app.test/v1/hello/c", "/v1/hello/d?", "/v1/hello/e?q=%41&r=%7e"]
    server = TestServer(app(), host="127.0.0.1")
    await server.start_server(access_log_class=LeanAccessLogger)
    try:
        with caplog.at_level(logging.INFO, logger="aiohttp.access"):
            for target in targets:
                reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
                writer.write(f"GET {target} HTTP/1.1\r\nHost: app.test\r\nConnection: close\r\n\r\n".encode())
                assert (await reader.read()).startswith(b"HTTP/1.1 201 ")
                writer.close()
                await writer.wait_closed()
    finally:
        await server.close()
    logged = [r.getMessage() for r in caplog.records if r.name == "aiohttp.access"]
    assert [re.search(r'"GET (\S+) HTTP/1.1"', line)[1] for line in logged] == targets  # type: ignore[index]
