"""REST GET throughput of the gateway next to a bare aiohttp app serving the same JSON, driven by `wrk`.

    python -m bench.bench_rest [--seconds S] [--connections C] [--profile out.txt]

A node (with a populated account: delegated keys, a custody key), one `chain-gateway` process in front of
it and a bare aiohttp app answering the gateway's own response bytes from memory, each its own process on
loopback; `wrk` (Debian package, installed by `make bench`) is the load generator for both, one after the
other in the same run. Printed: req/s of each, their ratio, and the gateway's CPU per GET (from /proc).
`--profile FILE` also samples the gateway with py-spy during its run (raw collapsed stacks into FILE).
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import aiohttp

from bench.bench_gateway import bare_server_main, cpu_seconds, start_gateway
from bench.table import Row, emit
from tests.fixtures.actors import new_account
from tests.fixtures.nodeproc import NodeProcess


def wrk(url: str, seconds: float, connections: int, threads: int = 2) -> tuple[float, int]:
    """(requests/s, non-2xx responses) of one wrk run."""
    out = subprocess.run(
        ["wrk", f"-t{threads}", f"-c{connections}", f"-d{seconds:g}s", url],
        check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    rps = re.search(r"Requests/sec:\s+([\d.]+)", out)
    bad = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)
    assert rps is not None, out
    return float(rps.group(1)), int(bad.group(1)) if bad else 0


async def measure_gateway(url: str, pid: int, ns: argparse.Namespace) -> tuple[float, float]:
    """(req/s, gateway CPU µs per request) under wrk; optionally sampled by py-spy meanwhile."""
    await asyncio.to_thread(wrk, url, 2, ns.connections)  # warm-up
    spy = None
    if ns.profile:
        spy = subprocess.Popen(
            [str(Path(sys.executable).parent / "py-spy"), "record", "-o", ns.profile, "-f", "raw", "-p", str(pid),
             "-d", str(int(ns.seconds)), "--gil"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
    before = cpu_seconds(pid)
    rps, bad = await asyncio.to_thread(wrk, url, ns.seconds, ns.connections)
    cpu = cpu_seconds(pid) - before
    if spy is not None:
        spy.wait(30)
    assert bad == 0, f"{bad} non-2xx answers from the gateway"
    return rps, cpu / (rps * ns.seconds) * 1e6


async def main_async(ns: argparse.Namespace) -> None:
    assert shutil.which("wrk"), "wrk is not installed (make bench installs the Debian package)"
    with tempfile.TemporaryDirectory() as d:
        node = NodeProcess(Path(d) / "node", "--block-interval", "0.1").start()
        try:
            c = node.client()
            alice = new_account(c, node.authority())
            gateway, port = await start_gateway(node, *ns.gateway_args)
            try:
                url = f"http://127.0.0.1:{port}/v1/accounts/0x{alice.address.hex()}"
                async with aiohttp.ClientSession() as s, s.get(url) as r:
                    body = await r.read()
                    assert r.status == 200, body
                gw_rps, gw_us = await measure_gateway(url, gateway.pid, ns)
            finally:
                gateway.terminate()
                await gateway.wait()
            ctx = multiprocessing.get_context("spawn")
            parent, child = ctx.Pipe()
            bare = ctx.Process(target=bare_server_main, args=(child, body), daemon=True)
            bare.start()
            bare_url = f"http://127.0.0.1:{parent.recv()}/v1/accounts/0x{alice.address.hex()}"
            await asyncio.to_thread(wrk, bare_url, 2, ns.connections)
            bare_before = cpu_seconds(bare.pid or 0)
            bare_rps, _ = await asyncio.to_thread(wrk, bare_url, ns.seconds, ns.connections)
            bare_us = (cpu_seconds(bare.pid or 0) - bare_before) / (bare_rps * ns.seconds) * 1e6
            parent.send("stop")
            bare.join(10)
        finally:
            node.stop()
    load = f"wrk -t2 -c{ns.connections} -d{ns.seconds:g}s"
    print(f"\n### REST GET, {len(body)}-byte JSON, load from {load}\n")
    print("| measure | gateway | bare aiohttp, same bytes | ratio |")
    print("|---|---:|---:|---:|")
    print(f"| GET /v1/accounts/{{ownerAddress}} req/s | {gw_rps:,.0f} | {bare_rps:,.0f} | {gw_rps / bare_rps:.3f} |")
    print(f"| server CPU per GET (µs) | {gw_us:,.0f} | {bare_us:,.0f} | {bare_us / gw_us:.3f} |")
    how = f"{gw_rps:,.0f} ÷ {bare_rps:,.0f} req/s ({load}); gateway {gw_us:,.0f} µs CPU per GET, bare {bare_us:,.0f} µs"
    emit(Row("rest_ratio", gw_rps / bare_rps, how))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--profile", default="", help="py-spy raw output file for the gateway's run")
    parser.add_argument("--gateway-arg", dest="gateway_args", action="append", default=[])
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
