"""REST GET throughput of the gateway next to a bare aiohttp app serving the same JSON, driven by `wrk`.

    python -m bench.bench_rest [--seconds S] [--connections C] [--workers 1,2] [--profile out.txt]

A node (with a populated account: delegated keys, a custody key), `chain-gateway` in front of it (once per
`--workers` count: one process, then `--workers 2`) and a bare aiohttp app answering the gateway's own
response bytes from memory in as many serving processes, each its own process on loopback; `wrk` (Debian
package, installed by `make bench`) is the load generator for all, one after the other in the same run.

Why the bare app gets the same number of processes: the row measures how close the gateway's REST path is
to aiohttp's floor, not how many processes it runs. A two-worker gateway against a one-process bare app
would credit the gateway with a second core the baseline was not given (docs/performance.md). The bare
app's processes share the port with SO_REUSEPORT (a bench-only baseline; the gateway's parent deals its
connections instead, gateway/workers.py).

Printed: req/s of each pair, their ratio, and the CPU per GET of each (from /proc, summed over the
gateway's parent and workers). The table row is the best same-process-count ratio, naming its configuration.
`--profile FILE` also samples the one-process gateway with py-spy during its run (raw collapsed stacks).
"""

from __future__ import annotations

import argparse
import asyncio
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import aiohttp

from bench.bench_gateway import Bare, start_gateway
from bench.bench_sse import cpu_seconds, family
from bench.table import Row, emit
from tests.fixtures.nodeproc import NodeProcess
from tests.fixtures.replicaset import funded_actors


def rotation_script(paths: list[str], where: Path) -> Path:
    """A wrk Lua script that sends the GETs of `paths` in turn (each wrk thread from its own start)."""
    listed = ",\n".join(f'  "{p}"' for p in paths)
    where.write_text(
        f"local paths = {{\n{listed}\n}}\nlocal i = 0\n"
        'request = function()\n  i = i % #paths + 1\n  return wrk.format("GET", paths[i])\nend\n'
    )
    return where


def wrk(url: str, seconds: float, connections: int, threads: int = 2, script: str = "") -> tuple[float, int]:
    """(requests/s, non-2xx responses) of one wrk run (`script`: a Lua file choosing each request's path)."""
    extra = ["-s", script] if script else []
    out = subprocess.run(
        ["wrk", f"-t{threads}", f"-c{connections}", f"-d{seconds:g}s", *extra, url],
        check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    rps = re.search(r"Requests/sec:\s+([\d.]+)", out)
    bad = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)
    assert rps is not None, out
    return float(rps.group(1)), int(bad.group(1)) if bad else 0


async def measure(
    url: str, pids: list[int], ns: argparse.Namespace, profile: str = "", node: list[int] | None = None
) -> tuple[float, float, float]:
    """(req/s, CPU µs per request of `pids`, of `node`) under wrk; optionally `pids[0]` sampled by py-spy."""
    await asyncio.to_thread(wrk, url, 2, ns.connections, 2, ns.script)  # warm-up
    spy = None
    if profile:
        spy = subprocess.Popen(
            [str(Path(sys.executable).parent / "py-spy"), "record", "-o", profile, "-f", "raw", "-p", str(pids[0]),
             "-d", str(int(ns.seconds)), "--gil"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
    before, node_before = cpu_seconds(pids), cpu_seconds(node or [])
    rps, bad = await asyncio.to_thread(wrk, url, ns.seconds, ns.connections, 2, ns.script)
    cpu, node_cpu = cpu_seconds(pids) - before, cpu_seconds(node or []) - node_before
    if spy is not None:
        spy.wait(30)
    assert bad == 0, f"{bad} non-2xx answers"
    return rps, cpu / (rps * ns.seconds) * 1e6, node_cpu / (rps * ns.seconds) * 1e6


@dataclass(frozen=True)
class Pair:
    """One configuration: the gateway with `workers` serving processes and the bare app with as many."""

    workers: int
    gw_rps: float
    gw_us: float
    bare_rps: float
    bare_us: float
    node_us: float  # the node's CPU per GET during the gateway's run (its processes, read workers included)

    @property
    def ratio(self) -> float:
        return self.gw_rps / self.bare_rps

    @property
    def label(self) -> str:
        return "chain-gateway" + (f" --workers {self.workers}" if self.workers > 1 else "")


async def measure_pair(node: NodeProcess, paths: list[str], workers: int, ns: argparse.Namespace) -> tuple[Pair, int]:
    """The gateway with `workers` processes, then the bare app with as many, back to back; wrk rotates over
    `paths` (one per account) on both, and the bare app answers each with the gateway's own bytes."""
    extra = ["--workers", str(workers)] if workers > 1 else []
    gateway, port = await start_gateway(node, *extra, *ns.gateway_args)
    bodies: dict[str, bytes] = {}
    try:
        url = f"http://127.0.0.1:{port}{paths[0]}"
        async with aiohttp.ClientSession() as s:
            for path in paths:
                async with s.get(f"http://127.0.0.1:{port}{path}") as r:
                    body = await r.read()
                    assert r.status == 200, body
                bodies[path.rpartition("/")[2]] = body
        profile = ns.profile if workers == 1 else ""
        node_pids = family(node.proc.pid) if node.proc is not None else []
        gw_rps, gw_us, node_us = await measure(url, family(gateway.pid), ns, profile, node_pids)
    finally:
        gateway.terminate()
        await gateway.wait()
    bare = Bare(bodies, workers)
    try:
        bare_rps, bare_us, _ = await measure(f"http://127.0.0.1:{bare.port}{paths[0]}", bare.pids, ns)
    finally:
        bare.stop()
    return Pair(workers, gw_rps, gw_us, bare_rps, bare_us, node_us), sum(map(len, bodies.values())) // len(bodies)


async def main_async(ns: argparse.Namespace) -> None:
    assert shutil.which("wrk"), "wrk is not installed (make bench installs the Debian package)"
    pairs: list[Pair] = []
    with tempfile.TemporaryDirectory() as d:
        node = NodeProcess(Path(d) / "node", "--block-interval", "0.1").start()
        try:
            actors = funded_actors(node.client(), node.authority(), ns.accounts)
            paths = [f"/v1/accounts/0x{a.address.hex()}" for a in actors]
            ns.script = str(rotation_script(paths, Path(d) / "rotate.lua"))
            for workers in ns.workers:
                pair, size = await measure_pair(node, paths, workers, ns)
                pairs.append(pair)
        finally:
            node.stop()
    load = f"wrk -t2 -c{ns.connections} -d{ns.seconds:g}s"
    print(
        f"\n### REST GET /v1/accounts/{{ownerAddress}} over {ns.accounts} accounts in turn, ~{size}-byte JSON, {load}\n"
    )
    print(
        "| gateway | req/s | bare aiohttp (same processes) req/s | ratio | gateway CPU per GET | bare CPU per GET "
        "| node CPU per GET |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for p in pairs:
        print(
            f"| {p.label} | {p.gw_rps:,.0f} | {p.bare_rps:,.0f} | {p.ratio:.3f} "
            f"| {p.gw_us:,.0f} µs | {p.bare_us:,.0f} µs | {p.node_us:,.0f} µs |"
        )
    best = max(pairs, key=lambda p: p.ratio)
    how = (
        f"{best.label}: {best.gw_rps:,.0f} ÷ {best.bare_rps:,.0f} req/s of a {best.workers}-process bare app "
        f"({load}); gateway {best.gw_us:,.0f} µs CPU per GET, bare {best.bare_us:,.0f} µs"
    )
    emit(Row("rest_ratio", best.ratio, how))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--workers", type=lambda t: [int(w) for w in t.split(",") if w], default=[1, 2])
    parser.add_argument("--accounts", type=int, default=1000, help="accounts wrk's GETs rotate over")
    parser.add_argument("--profile", default="", help="py-spy raw output file for the one-process gateway's run")
    parser.add_argument("--gateway-arg", dest="gateway_args", action="append", default=[])
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
