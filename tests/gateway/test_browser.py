"""A real browser: headless Chromium opens a page that uses EventSource on the gateway and makes a
gRPC-web call through the gateway's passthrough; the page reports what it received to the test."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from aiohttp import web

from chain.v1 import message_pb2 as pb
from tests.fixtures.actors import new_account
from tests.fixtures.nodeproc import ROOT, NodeProcess

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>chain gateway in a browser</title></head>
<body><pre id="out">running</pre><script>
const gw = "%(gateway)s";
const got = { events: [], grpcweb: null, errors: [] };
let pending = 2;
function finish() {
  if (--pending > 0) return;
  document.getElementById("out").textContent = JSON.stringify(got);
  fetch("/report", { method: "POST", body: JSON.stringify(got) });
}
const es = new EventSource(gw + "/v1/events/blocks");
es.addEventListener("block", (e) => {
  got.events.push({ id: e.lastEventId, number: JSON.parse(e.data).header.number });
  if (got.events.length === 3) { es.close(); finish(); }
});
es.onerror = () => got.errors.push("eventsource error");
// gRPC-web by hand: a 5-byte frame header and an empty GetNodeStatusRequest, then read the frames back.
fetch(gw + "/v1/grpc-web/chain.v1.ChainService/GetNodeStatus", {
  method: "POST",
  headers: { "content-type": "application/grpc-web+proto", "x-grpc-web": "1" },
  body: new Uint8Array([0, 0, 0, 0, 0]),
}).then(async (r) => {
  const buf = new Uint8Array(await r.arrayBuffer());
  const frames = [];
  for (let i = 0; i + 5 <= buf.length; ) {
    const len = (buf[i + 1] << 24) | (buf[i + 2] << 16) | (buf[i + 3] << 8) | buf[i + 4];
    frames.push({ flag: buf[i], body: buf.slice(i + 5, i + 5 + len) });
    i += 5 + len;
  }
  const trailer = frames.find((f) => f.flag & 0x80);
  const data = frames.find((f) => !(f.flag & 0x80));
  got.grpcweb = {
    http: r.status,
    contentType: r.headers.get("content-type"),
    trailers: trailer ? new TextDecoder().decode(trailer.body) : null,
    mentionsDevnet: data ? new TextDecoder().decode(data.body).includes("devnet") : false,
  };
  finish();
}).catch((e) => { got.errors.push(String(e)); finish(); });
</script></body></html>
"""


async def start_gateway(node: NodeProcess, origin: str) -> tuple[subprocess.Popen[str], int]:
    cmd = [
        sys.executable, "-m", "gateway.main", "--http-addr", "127.0.0.1:0",
        "--node-addr", node.grpc_target, "--node-web-url", node.web_url, "--cors-origin", origin,
        "--metrics-addr", "127.0.0.1:0",
    ]  # fmt: skip
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    line = await asyncio.wait_for(asyncio.to_thread(proc.stdout.readline), 30)
    return proc, int(json.loads(line)["http_port"])


# `make test` installs Chromium (Debian package chromium); only a bare local pytest may lack it, never CI.
@pytest.mark.skipif(CHROMIUM is None and not os.environ.get("CI"), reason="Chromium is installed by `make test`")
async def test_chromium_eventsource_and_grpc_web_through_the_gateway(tmp_path: Path) -> None:
    node = NodeProcess(tmp_path / "node").start()
    c = node.client()
    alice = new_account(c, node.authority())
    report: asyncio.Future[dict[str, object]] = asyncio.get_running_loop().create_future()
    served: dict[str, str] = {}  # the gateway's URL, known once it has started

    async def page(request: web.Request) -> web.Response:
        return web.Response(text=PAGE % served, content_type="text/html")

    async def receive(request: web.Request) -> web.Response:
        if not report.done():
            report.set_result(json.loads(await request.text()))
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_get("/", page)
    app.router.add_post("/report", receive)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    page_port = int(runner.addresses[0][1])
    origin = f"http://127.0.0.1:{page_port}"
    gateway, gw_port = await start_gateway(node, origin)
    served["gateway"] = f"http://127.0.0.1:{gw_port}"
    profile = tempfile.mkdtemp(prefix="chromium-")
    assert CHROMIUM is not None
    browser = subprocess.Popen(
        [
            CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            f"--user-data-dir={profile}", "--remote-debugging-port=0", f"{origin}/",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        for i in range(40):  # keep blocks coming while the page listens
            if report.done():
                break
            await asyncio.to_thread(c.commit, alice.b.account_data(pb.ACCOUNT_FIELD_BIO, f"browser {i}"))
        got = await asyncio.wait_for(report, 60)
    finally:
        browser.send_signal(signal.SIGTERM)
        browser.wait(10)
        gateway.send_signal(signal.SIGTERM)
        gateway.wait(10)
        await runner.cleanup()
        node.stop()
        shutil.rmtree(profile, ignore_errors=True)
    events = got["events"]
    assert isinstance(events, list) and len(events) == 3
    numbers = [int(e["number"]) for e in events]
    assert numbers == sorted(numbers) and len(set(numbers)) == 3
    assert all(e["id"] for e in events)
    grpcweb = got["grpcweb"]
    assert isinstance(grpcweb, dict)
    assert grpcweb["http"] == 200
    assert "grpc-status:0" in str(grpcweb["trailers"]).replace(" ", "")
    assert grpcweb["mentionsDevnet"] is True
