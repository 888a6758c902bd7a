"""REST GET throughput of the gateway next to a bare aiohttp app serving the same JSON, driven by `wrk`.

    python -m bench.bench_rest [--seconds S] [--connections C] [--workers 1,2] [--profile out.txt]

A node with its default flags (read workers sized from the machine; with a populated account: delegated keys,
a custody key), `chain-gateway` in front of it (once per
`--workers` count: one process, then `--workers 2`) and a bare aiohttp app answering the gateway's own
response bytes from memory in as many serving processes, each its own process on loopback; `wrk` (Debian
package, installed by `make bench`) is the load generator for all, in the same run: the gateway and the bare
app are up together and measured in alternating slices (`--slices`), summed per side.

Why the bare app gets the same number of processes: the row measures how close the gateway's REST path is
to aiohttp's floor, not how many processes it runs. A two-worker gateway against a one-process bare app
would credit the gateway with a second core the baseline was not given (docs/decisions.md). The bare
app's processes share the port with SO_REUSEPORT (a bench-only baseline; the gateway's parent deals its
connections instead, gateway/workers.py).

Printed: req/s of each pair, their ratio, and the CPU per GET of each (from /proc, summed over the
gateway's parent and workers). The table row is the best same-process-count ratio, naming its configuration.
The chain is idle while wrk runs, so after the first round every GET's node answer is one the gateway has
shaped before and its body is remembered (gateway/rest/memo.py); one more pair (`--memo-off`, on unless
`--no-memo-off`) runs the one-process gateway with `--rest-memo-bytes 0`, every body made from the answer
as a GET whose record just changed would be: printed beside the row, not the row.
`--profile FILE` also samples the one-process gateway with py-spy during its run (raw collapsed stacks).

Instructions per GET (`--instructions N`, 0 skips): the one-process gateway and one bare process, each run
under valgrind's callgrind (Debian `valgrind`, installed by `make bench`), answer N GETs of the same rotation
from an aiohttp client keeping 16 in flight, counted only between `callgrind_control -i on` and `off`
(start-up and a warm-up of 200 GETs left out). Instructions do not depend on what else the host is doing, so
this figure repeats to within ~1% where req/s and CPU per GET move by ±20%. It counts user-space instructions
of every thread of the process, not system calls or cache misses, and under callgrind's slowdown the gateway's
batches differ from the wrk run's (4-5 reads each on the read stream, ~11 under wrk): a figure for comparing
commits of the same path and transport, not a throughput.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from bench.bench_gateway import Bare, bare_main, start_gateway
from bench.bench_sse import cpu_seconds, family
from bench.table import Row, emit
from node.server.readers.supervisor import WORKER_MODULE
from tests.fixtures.nodeproc import ROOT, NodeProcess
from tests.fixtures.procs import children_running
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


@dataclass
class Tally:
    """What one side's slices added up to: requests answered, its processes' CPU, the node's CPU."""

    requests: float = 0.0
    cpu: float = 0.0
    node_cpu: float = 0.0
    seconds: float = 0.0

    @property
    def rps(self) -> float:
        return self.requests / self.seconds

    def us_per_request(self, cpu: float) -> float:
        return cpu / self.requests * 1e6


async def run_slice(url: str, pids: list[int], seconds: float, ns: argparse.Namespace, into: Tally,
                    node: list[int] | None = None) -> None:  # fmt: skip
    """One wrk run of `seconds` against `url`, added to `into` (its req/s and the CPU `pids` and `node` used)."""
    before, node_before = cpu_seconds(pids), cpu_seconds(node or [])
    rps, bad = await asyncio.to_thread(wrk, url, seconds, ns.connections, 2, ns.script)
    into.cpu += cpu_seconds(pids) - before
    into.node_cpu += cpu_seconds(node or []) - node_before
    assert bad == 0, f"{bad} non-2xx answers"
    into.requests += rps * seconds
    into.seconds += seconds


def slice_seconds(ns: argparse.Namespace) -> int:
    """One slice's wrk run: `--seconds` per side cut in `--slices` (wrk -d takes whole seconds)."""
    return max(1, round(float(ns.seconds) / int(ns.slices)))


def spy_on(pid: int, out: str, seconds: float) -> subprocess.Popen[bytes]:
    """py-spy sampling `pid` (raw collapsed stacks into `out`) for `seconds`."""
    return subprocess.Popen(
        [str(Path(sys.executable).parent / "py-spy"), "record", "-o", out, "-f", "raw", "-p", str(pid),
         "-d", str(int(seconds)), "--gil"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip


@dataclass(frozen=True)
class Pair:
    """One configuration: the gateway with `workers` serving processes and the bare app with as many."""

    workers: int
    gw_rps: float
    gw_us: float
    bare_rps: float
    bare_us: float
    node_us: float  # the node's CPU per GET during the gateway's run (its processes, read workers included)
    extra: tuple[str, ...] = ()  # flags beyond the shipped defaults (the memo turned off)

    @property
    def ratio(self) -> float:
        return self.gw_rps / self.bare_rps

    @property
    def label(self) -> str:
        return " ".join(["chain-gateway", *([f"--workers {self.workers}"] if self.workers > 1 else []), *self.extra])


async def gateway_bodies(port: int, paths: list[str]) -> dict[str, bytes]:
    """The gateway's answer to each path, by the path's last segment (the account), for the bare app."""
    bodies: dict[str, bytes] = {}
    async with aiohttp.ClientSession() as s:
        for path in paths:
            async with s.get(f"http://127.0.0.1:{port}{path}") as r:
                body = await r.read()
                assert r.status == 200, body
            bodies[path.rpartition("/")[2]] = body
    return bodies


async def measure_pair(
    node: NodeProcess, paths: list[str], workers: int, ns: argparse.Namespace, extra: tuple[str, ...] = ()
) -> tuple[Pair, int]:
    """The gateway with `workers` processes and the bare app with as many, both up, measured in alternating
    slices (bare, gateway, bare, gateway, ...; `--slices`) and summed: this host's speed moves within a
    minute, so each side sees the same moments (one run each, back to back, can credit the gateway with
    a pass because the bare app's minute was slow). wrk rotates over
    `paths` (one per account) on both, and the bare app answers each with the gateway's own bytes."""
    more = ["--workers", str(workers)] if workers > 1 else []
    gateway, port = await start_gateway(node, *more, *extra, *ns.gateway_args)
    bare: Bare | None = None
    try:
        gw_url = f"http://127.0.0.1:{port}{paths[0]}"
        bodies = await gateway_bodies(port, paths)
        bare = Bare(bodies, workers)
        bare_url = f"http://127.0.0.1:{bare.port}{paths[0]}"
        for url in (bare_url, gw_url):  # warm-up: first connections, caches, the node's read path
            await asyncio.to_thread(wrk, url, 2, ns.connections, 2, ns.script)
        part = slice_seconds(ns)
        gw_pids, node_pids = family(gateway.pid), family(node.proc.pid) if node.proc is not None else []
        both_sides = 2 * ns.slices * part  # the spy sees the gateway's slices and, idle, the bare app's
        spy = spy_on(gw_pids[0], ns.profile, both_sides + 2) if ns.profile and workers == 1 else None
        gw, plain = Tally(), Tally()
        for _ in range(ns.slices):
            await run_slice(bare_url, bare.pids, part, ns, plain)
            await run_slice(gw_url, gw_pids, part, ns, gw, node_pids)
        if spy is not None:
            spy.wait(both_sides + 30)
    finally:
        gateway.terminate()
        await gateway.wait()
        if bare is not None:
            bare.stop()
    pair = Pair(workers, gw.rps, gw.us_per_request(gw.cpu), plain.rps, plain.us_per_request(plain.cpu),
                gw.us_per_request(gw.node_cpu), extra)  # fmt: skip
    return pair, sum(map(len, bodies.values())) // len(bodies)


MEMO_OFF = ("--rest-memo-bytes", "0")
IN_FLIGHT = 16  # GETs the instruction count's client keeps in flight


def callgrind(out: Path) -> list[str]:
    """valgrind's callgrind with counting off until `callgrind_control -i on`, writing `out`."""
    return ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}"]


def counted(out: Path) -> int:
    """The instructions a callgrind output file counted (its `totals:` line, else `summary:`)."""
    totals = [int(line.split()[1]) for line in out.read_text().splitlines() if line.startswith(("totals:", "summary:"))]
    assert totals, f"no totals in {out}"
    return max(totals)


async def gets(port: int, paths: list[str], n: int) -> None:
    """`n` GETs over `paths` in turn, `IN_FLIGHT` at a time, each answered 200."""
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=IN_FLIGHT)) as session:
        order = iter(range(n))

        async def one_client() -> None:
            for i in order:
                async with session.get(f"http://127.0.0.1:{port}{paths[i % len(paths)]}") as r:
                    await r.read()
                    assert r.status == 200, r.status

        await asyncio.gather(*(one_client() for _ in range(IN_FLIGHT)))


async def instructions_per_get(
    proc: asyncio.subprocess.Process, port: int, paths: list[str], n: int, out: Path
) -> float:
    """Warm `proc` up, count its instructions over `n` GETs, stop it, and divide."""
    await gets(port, paths, 200)
    subprocess.run(["callgrind_control", "-i", "on", str(proc.pid)], check=True, capture_output=True)
    await gets(port, paths, n)
    subprocess.run(["callgrind_control", "-i", "off", str(proc.pid)], check=True, capture_output=True)
    proc.terminate()
    await proc.wait()
    return counted(out) / n


async def measure_instructions(node: NodeProcess, paths: list[str], n: int, work: Path) -> tuple[float, float]:
    """(gateway, bare) instructions per GET, each process alone under callgrind; the bare app answers each
    path with the gateway's own bytes, as in the wrk pairs."""
    gw_out, bare_out = work / "gateway.callgrind", work / "bare.callgrind"
    gateway, port = await start_gateway(node, wrap=callgrind(gw_out), timeout=600)
    bodies = await gateway_bodies(port, paths)
    gw = await instructions_per_get(gateway, port, paths, n, gw_out)
    (work / "bodies.json").write_text(json.dumps({owner: body.hex() for owner, body in bodies.items()}))
    bare = await asyncio.create_subprocess_exec(
        *callgrind(bare_out), sys.executable, "-m", "bench.bench_rest", "--serve-bare", str(work / "bodies.json"),
        cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)), stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    assert bare.stdout is not None
    bare_port = int(json.loads(await asyncio.wait_for(bare.stdout.readline(), 600))["http_port"])
    plain = await instructions_per_get(bare, bare_port, paths, n, bare_out)
    return gw, plain


class StdioPipe:
    """`bare_main`'s parent when it runs as its own command: the port printed as JSON, stop at stdin's end."""

    def send(self, obj: Any) -> None:
        print(json.dumps({"http_port": obj}), flush=True)

    def recv(self) -> Any:
        return sys.stdin.read()


def serve_bare(bodies_file: str) -> None:
    """The bench's bare aiohttp app (bench_gateway.bare_main) as a command, for valgrind to run."""
    bodies = {k: bytes.fromhex(v) for k, v in json.loads(Path(bodies_file).read_text()).items()}
    bare_main(StdioPipe(), bodies, 0)


async def main_async(ns: argparse.Namespace) -> None:
    assert shutil.which("wrk"), "wrk is not installed (make bench installs the Debian package)"
    pairs: list[Pair] = []
    with tempfile.TemporaryDirectory() as d:
        node = NodeProcess(Path(d) / "node", "--block-interval", "0.1", read_workers=None).start()  # the defaults
        assert node.proc is not None
        readers = len(children_running(node.proc.pid, WORKER_MODULE))
        try:
            actors = funded_actors(node.client(), node.authority(), ns.accounts)
            paths = [f"/v1/accounts/0x{a.address.hex()}" for a in actors]
            ns.script = str(rotation_script(paths, Path(d) / "rotate.lua"))
            for workers in ns.workers:
                pair, size = await measure_pair(node, paths, workers, ns)
                pairs.append(pair)
            if ns.memo_off:  # every body made from scratch: what a GET costs when its answer is new
                pair, size = await measure_pair(node, paths, 1, ns, MEMO_OFF)
                pairs.append(pair)
            counts = None
            if ns.instructions and shutil.which("valgrind"):
                counts = await measure_instructions(node, paths[:100], ns.instructions, Path(d))
        finally:
            node.stop()
    load = f"wrk -t2 -c{ns.connections}, {ns.slices} alternating slices of {slice_seconds(ns)} s per side"
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
    instructions = ""
    if counts is not None:
        gw_count, bare_count = counts
        print(f"\n### Instructions per GET (callgrind, {ns.instructions:,} GETs, {IN_FLIGHT} in flight)\n")
        print("| chain-gateway | bare aiohttp | bare ÷ gateway |\n|---:|---:|---:|")
        print(f"| {gw_count:,.0f} | {bare_count:,.0f} | {bare_count / gw_count:.3f} |")
        instructions = f"; callgrind: {gw_count / 1000:,.0f}k instructions per GET, bare {bare_count / 1000:,.0f}k"
    elif ns.instructions:
        print("\n(instructions per GET not counted: valgrind is not installed)")
    best = max((p for p in pairs if not p.extra), key=lambda p: p.ratio)  # the shipped settings' best
    off = "".join(f"; {p.label}: {p.ratio:.3f}" for p in pairs if p.extra)
    how = (
        f"{best.label}: {best.gw_rps:,.0f} ÷ {best.bare_rps:,.0f} req/s of a {best.workers}-process bare app "
        f"({load}); gateway {best.gw_us:,.0f} µs CPU per GET, bare {best.bare_us:,.0f} µs{instructions}{off}; "
        f"the node's default flags ({readers} read workers)"
    )
    emit(Row("rest_ratio", best.ratio, how))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--workers", type=lambda t: [int(w) for w in t.split(",") if w], default=[1, 2])
    parser.add_argument("--accounts", type=int, default=1000, help="accounts wrk's GETs rotate over")
    parser.add_argument(
        "--memo-off", action=argparse.BooleanOptionalAction, default=True,
        help="also the one-process gateway with --rest-memo-bytes 0 (printed, not the row)",
    )  # fmt: skip
    parser.add_argument("--slices", type=int, default=3, help="bare/gateway alternations per pair (see measure_pair)")
    parser.add_argument("--profile", default="", help="py-spy raw output file for the one-process gateway's run")
    parser.add_argument("--gateway-arg", dest="gateway_args", action="append", default=[])
    parser.add_argument("--instructions", type=int, default=2000, help="GETs counted under callgrind (0 skips)")
    parser.add_argument("--serve-bare", default="", help=argparse.SUPPRESS)  # the bare app, run by valgrind
    ns = parser.parse_args()
    if ns.serve_bare:
        serve_bare(ns.serve_bare)
        return
    asyncio.run(main_async(ns))


if __name__ == "__main__":
    main()
