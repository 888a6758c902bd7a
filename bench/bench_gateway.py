"""The REST/SSE gateway under load, next to a bare aiohttp handler in the same run.

    python -m bench.bench_gateway [--sse-clients N] [--seconds S]

- REST GET throughput of /v1/accounts/{ownerAddress} (a real account, the gateway asking a real node)
  next to a bare aiohttp app answering a JSON document of the same size from memory, both in their own
  process and driven by the same client, and next to the node's own GetAccount over native gRPC (what
  the gateway asks for each request);
- N concurrent SSE clients on /v1/events/blocks (bench/bench_sse.py: a 4-process load client, a bare
  aiohttp fan-out of the same bytes as the baseline, the gateway with 1 and 2 workers): block commit ->
  receipt p50/p99 and the gateway's CPU per delivery.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import resource
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, Protocol

import aiohttp
import grpc
from aiohttp import web

from bench import bench_sse
from bench.table import Row, emit
from chain.v1 import rpc_pb2, service_pb2_grpc
from tests.fixtures.actors import new_account
from tests.fixtures.nodeproc import ROOT, NodeProcess


def raise_fd_limit(wanted: int) -> int:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = min(hard, max(soft, wanted))
    resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return target


class Pipe(Protocol):
    """What `bare_main` needs of its parent: the port goes out, anything coming back means stop."""

    def send(self, obj: Any) -> None: ...

    def recv(self) -> Any: ...


def bare_main(conn: Pipe, body: bytes | Mapping[str, bytes], port: int) -> None:
    """One bare aiohttp process answering `body` (or, given a mapping, the body of the path's account: a dict
    lookup, 404 for another); `port` 0 picks one, else it joins that port (SO_REUSEPORT)."""

    async def handler(request: web.Request) -> web.Response:
        if isinstance(body, bytes):
            return web.Response(body=body, content_type="application/json")
        found = body.get(request.match_info["owner"])
        if found is None:
            raise web.HTTPNotFound()
        return web.Response(body=found, content_type="application/json")

    async def main() -> None:
        app = web.Application()
        app.router.add_get("/v1/accounts/{owner}", handler)
        runner = web.AppRunner(app)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", port, reuse_port=True).start()
        conn.send(int(runner.addresses[0][1]))
        await asyncio.to_thread(conn.recv)
        await runner.cleanup()

    asyncio.run(main())


class Bare:
    """`count` bare aiohttp processes on one port."""

    def __init__(self, body: bytes | Mapping[str, bytes], count: int) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.pipes: list[Connection] = []
        self.procs: list[multiprocessing.process.BaseProcess] = []
        self.port = 0
        for _ in range(count):
            parent, child = ctx.Pipe()
            proc = ctx.Process(target=bare_main, args=(child, body, self.port), daemon=True)
            proc.start()
            self.port = parent.recv()
            self.pipes.append(parent)
            self.procs.append(proc)

    @property
    def pids(self) -> list[int]:
        return [p.pid or 0 for p in self.procs]

    def stop(self) -> None:
        for pipe in self.pipes:
            pipe.send("stop")
        for proc in self.procs:
            proc.join(10)


async def get_rps(url: str, seconds: float, concurrency: int) -> float:
    count = 0
    deadline = time.perf_counter() + seconds
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency)) as session:

        async def worker() -> None:
            nonlocal count
            while time.perf_counter() < deadline:
                async with session.get(url) as resp:
                    await resp.read()
                    assert resp.status == 200, resp.status
                count += 1

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return count / seconds


async def grpc_rps(target: str, owner: bytes, seconds: float, concurrency: int) -> float:
    count = 0
    deadline = time.perf_counter() + seconds
    async with grpc.aio.insecure_channel(target) as channel:
        stub = service_pb2_grpc.ChainServiceStub(channel)
        request = rpc_pb2.GetAccountRequest(owner_address=owner)

        async def worker() -> None:
            nonlocal count
            while time.perf_counter() < deadline:
                await stub.GetAccount(request)
                count += 1

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return count / seconds


async def start_gateway(
    node: NodeProcess, *extra: str, wrap: Sequence[str] = (), timeout: float = 30.0
) -> tuple[asyncio.subprocess.Process, int]:
    """`chain-gateway` in front of `node` (under `wrap`, e.g. valgrind, when given) and its HTTP port."""
    proc = await asyncio.create_subprocess_exec(
        *wrap, sys.executable, "-m", "gateway.main", "--http-addr", "127.0.0.1:0", "--node-addr", node.grpc_target,
        "--node-internal-addr", node.internal_target,
        "--node-web-url", node.web_url, "--metrics-addr", "127.0.0.1:0", *extra,
        cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    assert proc.stdout is not None
    line = await asyncio.wait_for(proc.stdout.readline(), timeout)
    return proc, int(json.loads(line)["http_port"])


async def main_async(ns: argparse.Namespace) -> None:
    fds = raise_fd_limit(3 * ns.sse_clients + 1000)
    with tempfile.TemporaryDirectory() as d:
        node = NodeProcess(Path(d) / "node", "--block-interval", "0.1").start()
        try:
            c = node.client()
            alice = new_account(c, node.authority())
            gateway, port = await start_gateway(node, "--sse-max-per-ip", str(ns.sse_clients + 10))
            account_url = f"http://127.0.0.1:{port}/v1/accounts/0x{alice.address.hex()}"
            async with aiohttp.ClientSession() as s, s.get(account_url) as r:
                body = await r.read()
            gw_rps = await get_rps(account_url, ns.seconds, 16)
            node_rps = await grpc_rps(node.grpc_target, alice.address, ns.seconds, 16)
            bare = Bare(body, 1)
            bare_rps = await get_rps(f"http://127.0.0.1:{bare.port}/v1/accounts/x", ns.seconds, 16)
            bare.stop()
            gateway.terminate()
            await gateway.wait()
        finally:
            node.stop()
    print(f"\n### Gateway (file descriptor limit {fds})\n")
    print("| measure | gateway | bare aiohttp | ratio |")
    print("|---|---:|---:|---:|")
    print(f"| GET /v1/accounts/{{ownerAddress}} req/s (16 concurrent) | {gw_rps:,.0f} | {bare_rps:,.0f} | "
          f"{gw_rps / bare_rps:.2f} |")  # fmt: skip
    print(f"\nThe node's GetAccount over native gRPC, same client concurrency: {node_rps:,.0f} calls/s; the gateway "
          f"serves {gw_rps / node_rps:.2f}x that as REST/JSON.")  # fmt: skip
    rows = await asyncio.to_thread(bench_sse.sse_rows, ns.sse_clients, 4, ns.sse_seconds, (1, 2))
    bench_sse.print_rows(rows)
    base, best = rows[0], min(rows[1:], key=lambda r: r.p99)
    load = "" if best.clients >= 10_000 else ", FEWER clients than the goal's 10,000"
    how = (f"{best.server}, {best.clients:,} clients{load} (4 load processes), {best.deliveries:,} / "
           f"{best.clients * best.blocks:,} delivered, {best.p99 / base.p99:.2f}x the p99 of a bare aiohttp fan-out "
           f"in the same run ({base.p99:.0f} ms), {best.cpu_us:.1f} µs server CPU per delivery")  # fmt: skip
    emit(Row("sse_p99", best.p99, how, smaller_load=best.clients < 10_000))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sse-clients", type=int, default=10_000)
    parser.add_argument("--sse-seconds", type=float, default=10.0)
    parser.add_argument("--seconds", type=float, default=5.0)
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
