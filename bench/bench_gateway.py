"""The REST/SSE gateway under load, next to a bare aiohttp handler in the same run.

    python -m bench.bench_gateway [--sse-clients N] [--seconds S]

- REST GET throughput of /v1/accounts/{ownerAddress} (a real account, the gateway asking a real node)
  next to a bare aiohttp app answering a JSON document of the same size from memory, both in their own
  process and driven by the same client, and next to the node's own GetAccount over native gRPC (what
  the gateway asks for each request);
- N concurrent SSE clients on /v1/events/blocks of one gateway (a load client on loopback): the delay
  from a block's commit (its header timestamp) to its delivery on each client, p50/p99, next to the same
  measure with one client (the bare baseline: the node's commit-to-stream path plus one hop).
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
from multiprocessing.connection import Connection
from pathlib import Path

import aiohttp
import grpc
from aiohttp import web

from bench.table import Row, emit
from chain.v1 import message_pb2 as pb
from chain.v1 import rpc_pb2, service_pb2_grpc
from tests.fixtures.actors import new_account
from tests.fixtures.nodeproc import ROOT, NodeProcess


def raise_fd_limit(wanted: int) -> int:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = min(hard, max(soft, wanted))
    resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return target


def bare_server_main(conn: Connection, body: bytes) -> None:
    async def handler(request: web.Request) -> web.Response:
        return web.Response(body=body, content_type="application/json")

    async def main() -> None:
        app = web.Application()
        app.router.add_get("/v1/accounts/{owner}", handler)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        conn.send(int(runner.addresses[0][1]))
        await asyncio.to_thread(conn.recv)
        await runner.cleanup()

    asyncio.run(main())


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


async def start_gateway(node: NodeProcess, *extra: str) -> tuple[asyncio.subprocess.Process, int]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "gateway.main", "--http-addr", "127.0.0.1:0", "--node-addr", node.grpc_target,
        "--node-web-url", node.web_url, "--metrics-addr", "127.0.0.1:0", *extra,
        cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    assert proc.stdout is not None
    line = await asyncio.wait_for(proc.stdout.readline(), 30)
    return proc, int(json.loads(line)["http_port"])


async def sse_client(
    session: aiohttp.ClientSession, url: str, latencies: list[float], ready: asyncio.Event, stop: asyncio.Event
) -> None:
    # Reads whatever arrived and splits it into frames (cheaper than a line at a time, so that the load
    # client, which shares the machine, costs less than the gateway it measures).
    async with session.get(url, timeout=aiohttp.ClientTimeout(total=None, sock_read=None)) as resp:
        ready.set()
        pending = b""
        async for chunk in resp.content.iter_any():
            frames = (pending + chunk).split(b"\n\n")
            pending = frames.pop()
            now = time.time() * 1000
            for frame in frames:
                _, found, data = frame.partition(b"\ndata: ")
                if found:
                    latencies.append(now - int(json.loads(data)["header"]["timestamp_ms"]))
            if stop.is_set():
                return


def cpu_seconds(pid: int) -> float:
    """User + system CPU time a process has used so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def sse_phase(gw_port: int, gw_pid: int, node: NodeProcess, clients: int, seconds: float) -> dict[str, float]:
    latencies: list[float] = []
    stop = asyncio.Event()
    url = f"http://127.0.0.1:{gw_port}/v1/events/blocks"
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:
        readies = [asyncio.Event() for _ in range(clients)]
        tasks = []
        for i in range(clients):
            tasks.append(asyncio.create_task(sse_client(session, url, latencies, readies[i], stop)))
            if i % 500 == 499:
                await asyncio.sleep(0.05)
        await asyncio.wait_for(asyncio.gather(*(r.wait() for r in readies)), 300)
        connected = time.perf_counter()
        c = node.client()
        alice = new_account(c, node.authority())
        latencies.clear()
        blocks = 0
        cpu_before, wall_before = cpu_seconds(gw_pid), time.perf_counter()
        while time.perf_counter() - connected < seconds:
            await asyncio.to_thread(c.commit, alice.b.account_data(pb.ACCOUNT_FIELD_BIO, f"sse {blocks}"))
            blocks += 1
            await asyncio.sleep(0.5)
        await asyncio.sleep(2)  # the last block's deliveries
        gw_cpu, wall = cpu_seconds(gw_pid) - cpu_before, time.perf_counter() - wall_before
        stop.set()
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    ordered = sorted(latencies)
    return {
        "clients": clients,
        "blocks": blocks,
        "deliveries": len(ordered),
        "p50": ordered[len(ordered) // 2] if ordered else float("nan"),
        "p99": ordered[int(len(ordered) * 0.99)] if ordered else float("nan"),
        "gw_cpu_share": gw_cpu / wall,
        "gw_us_per_delivery": gw_cpu / max(1, len(ordered)) * 1e6,
    }


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
            ctx = multiprocessing.get_context("spawn")
            parent, child = ctx.Pipe()
            bare = ctx.Process(target=bare_server_main, args=(child, body), daemon=True)
            bare.start()
            bare_port = parent.recv()
            bare_rps = await get_rps(f"http://127.0.0.1:{bare_port}/v1/accounts/x", ns.seconds, 16)
            parent.send("stop")
            bare.join(10)
            one = await sse_phase(port, gateway.pid, node, 1, ns.sse_seconds)
            sse = await sse_phase(port, gateway.pid, node, ns.sse_clients, ns.sse_seconds)
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
    print("\n| SSE on /v1/events/blocks, blocks 0.5 s apart | clients | blocks | deliveries | p50 ms | p99 ms |")
    print("|---|---:|---:|---:|---:|---:|")
    for label, row in (("baseline: one client", one), ("load", sse)):
        counts = f"{row['clients']:,} | {row['blocks']:.0f} | {row['deliveries']:,}"
        print(f"| {label} | {counts} | {row['p50']:.0f} | {row['p99']:.0f} |")
    print(f"\nCommit -> delivery with {sse['clients']:,} clients: p50 {sse['p50'] / one['p50']:.1f}x and "
          f"p99 {sse['p99'] / one['p99']:.1f}x the one-client figures. The gateway process used "
          f"{sse['gw_cpu_share']:.0%} of a core over the phase, {sse['gw_us_per_delivery']:.1f} us of CPU per "
          f"delivery; the rest of the delay is the load client (one process reading every stream).")  # fmt: skip
    load = "" if sse["clients"] >= 10_000 else ", FEWER clients than the goal's 10,000"
    how = (f"{sse['clients']:,} clients{load}, {sse['deliveries']:,} deliveries, one-client p99 {one['p99']:.0f} ms, "
           f"{sse['gw_us_per_delivery']:.1f} µs gateway CPU per delivery")  # fmt: skip
    emit(Row("sse_p99", sse["p99"], how, smaller_load=sse["clients"] < 10_000))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sse-clients", type=int, default=10_000)
    parser.add_argument("--sse-seconds", type=float, default=10.0)
    parser.add_argument("--seconds", type=float, default=5.0)
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
