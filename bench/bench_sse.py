"""10,000 SSE clients on one gateway: block commit -> client receipt, next to a bare fan-out in the same run.

    python -m bench.bench_sse [--clients 10000] [--procs 4] [--seconds 10] [--workers 1,2]

- A node (blocks every 100 ms) and, one after the other, the servers measured: a bare aiohttp SSE server
  (the baseline) that follows the node's SubscribeBlocks itself and writes each block's frame, built once,
  to every client's transport in one loop (no hub, no filters, no lag accounting: the floor of a
  one-process Python fan-out of the same bytes), then `chain-gateway` (one process, then `--workers N`).
- The load client is `--procs` processes (4), each holding clients/procs connections on
  /v1/events/blocks with a bare asyncio protocol (no HTTP client library: a receipt costs the client a
  few microseconds), so the server, not the client, is the bound.
- Commit time is the block header's `timestamp_ms` (set by the node when it builds the block, before it
  commits it), read from the event's `data`; receipt time is the client's wall clock when the bytes
  arrive. Same machine, same clock.
- A block every 0.5 s for `--seconds`; per server: deliveries (expected: clients x blocks), p50/p99 of
  commit -> receipt, the median over blocks of the spread between a block's first and last receipt, and
  the server's CPU (all its processes) per delivery.

`sse_rows(...)` returns the rows (used by bench.bench_gateway, run by `make bench`); `issue_row(rows)` the
row of the throughput table.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import multiprocessing
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path

import grpc
from aiohttp import web

from chain.v1 import message_pb2 as pb
from chain.v1 import rpc_pb2, service_pb2_grpc
from gateway.events.model import Event  # the bare server writes the same bytes as the gateway (built once)
from tests.fixtures.actors import new_account
from tests.fixtures.nodeproc import ROOT, NodeProcess

GOAL_P99_MS = 250.0
STAMP = b'"timestamp_ms":"'
NUMBER = b'"number":"'


def raise_fd_limit(wanted: int) -> int:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = min(hard, max(soft, wanted))
    resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return target


# ---- the load client: one process holds many connections ----


class _Reader(asyncio.Protocol):
    """One SSE connection: records (block number, receipt ms - header timestamp ms) per block event."""

    def __init__(self, request: bytes, out: list[tuple[int, float]], ready: asyncio.Future[None]) -> None:
        self.request = request
        self.out = out
        self.ready = ready
        self.pending = b""
        self.headers_done = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        transport.write(self.request)

    def data_received(self, data: bytes) -> None:
        now = time.time() * 1000
        buf = self.pending + data
        if not self.headers_done:
            head, found, buf = buf.partition(b"\r\n\r\n")
            if not found:
                self.pending = head
                return
            self.headers_done = True
            if not self.ready.done():
                self.ready.set_result(None)
        end = buf.rfind(b"\n\n")
        if end < 0:
            self.pending = buf
            return
        self.pending = buf[end + 2 :]
        at = 0
        while (at := buf.find(STAMP, at, end)) >= 0:
            at += len(STAMP)
            stamp = int(buf[at : buf.index(b'"', at)])
            n = buf.rfind(NUMBER, 0, at) + len(NUMBER)
            self.out.append((int(buf[n : buf.index(b'"', n)]), now - stamp))

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.ready.done():
            self.ready.set_exception(ConnectionError(f"closed before the headers: {exc!r}"))


async def _open(port: int, count: int, request: bytes, out: list[tuple[int, float]]) -> list[asyncio.Transport]:
    """`count` streams with their response headers in; one closed before its headers is opened again."""
    loop = asyncio.get_running_loop()
    transports: list[asyncio.Transport] = []
    for _round in range(5):
        opened: list[tuple[asyncio.Transport, asyncio.Future[None]]] = []
        for i in range(count):
            ready: asyncio.Future[None] = loop.create_future()
            transport, _ = await loop.create_connection(
                functools.partial(_Reader, request, out, ready), "127.0.0.1", port
            )
            opened.append((transport, ready))
            if i % 250 == 249:
                await asyncio.sleep(0.02)  # let the server accept, not only the backlog
        results = await asyncio.wait_for(asyncio.gather(*(r for _, r in opened), return_exceptions=True), 300)
        transports += [t for (t, _), r in zip(opened, results, strict=True) if r is None]
        count = sum(1 for r in results if r is not None)
        if not count:
            return transports
    raise ConnectionError(f"{count} streams did not open")


async def _hold(port: int, clients: int, conn: Connection) -> None:
    out: list[tuple[int, float]] = []
    request = f"GET /v1/events/blocks HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: text/event-stream\r\n\r\n".encode()
    transports = await _open(port, clients, request, out)
    conn.send("connected")
    await asyncio.to_thread(conn.recv)  # "stop"
    for t in transports:
        t.abort()
    conn.send(out)


def client_main(port: int, clients: int, conn: Connection) -> None:
    raise_fd_limit(clients + 100)
    asyncio.run(_hold(port, clients, conn))


# ---- the bare baseline ----


def bare_main(node_target: str, conn: Connection) -> None:
    """A bare aiohttp SSE server: follows the node's blocks and writes each frame, built once, to every client."""
    raise_fd_limit(20_000)

    async def main() -> None:
        clients: set[asyncio.Transport] = set()

        async def handler(request: web.Request) -> web.StreamResponse:
            response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
            response.enable_chunked_encoding()
            await response.prepare(request)
            await response.write(b"retry: 1000\n\n")
            transport = request.transport
            assert transport is not None
            clients.add(transport)
            try:
                await asyncio.Event().wait()
            finally:
                clients.discard(transport)
            return response

        async def follow() -> None:
            async with grpc.aio.insecure_channel(node_target) as channel:
                stub = service_pb2_grpc.ChainServiceStub(channel)
                call = stub.SubscribeBlocks(rpc_pb2.SubscribeBlocksRequest(include_chunks=False))
                async for response in call:
                    chunk = Event.from_block(response.block).chunk
                    for transport in list(clients):
                        if not transport.is_closing():
                            transport.write(chunk)

        app = web.Application()
        app.router.add_get("/v1/events/blocks", handler)
        runner = web.AppRunner(app, handler_cancellation=True)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0, backlog=4096)
        await site.start()
        task = asyncio.create_task(follow())
        conn.send(int(runner.addresses[0][1]))
        await asyncio.to_thread(conn.recv)
        task.cancel()
        await runner.shutdown()

    asyncio.run(main())


# ---- a run ----


def cpu_seconds(pids: Sequence[int]) -> float:
    """User + system CPU time the processes have used so far (Linux /proc)."""
    total = 0.0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def family(pid: int) -> list[int]:
    """`pid` and its child processes (a gateway's workers)."""
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        children = []
    return [pid, *(int(c) for c in children)]


@dataclass
class Row:
    server: str
    clients: int
    blocks: int
    deliveries: int
    p50: float
    p99: float
    spread: float  # median over blocks of (last receipt - first receipt), ms
    cpu_us: float  # server CPU per delivery

    def cells(self) -> str:
        expected = self.clients * self.blocks
        return (
            f"| {self.server} | {self.clients:,} | {self.blocks} | {self.deliveries:,} / {expected:,} | "
            f"{self.p50:.0f} | {self.p99:.0f} | {self.spread:.0f} | {self.cpu_us:.1f} |"
        )


def measure(
    label: str,
    port: int,
    server_pid: int,
    node: NodeProcess,
    clients: int,
    procs: int,
    seconds: float,
    profile: Path | None = None,
) -> Row:
    ctx = multiprocessing.get_context("spawn")
    pipes, workers = [], []
    for i in range(procs):
        share = clients // procs + (1 if i < clients % procs else 0)
        parent, child = ctx.Pipe()
        p = ctx.Process(target=client_main, args=(port, share, child), daemon=True)
        p.start()
        pipes.append(parent)
        workers.append(p)
    for parent in pipes:
        if not parent.poll(300) or parent.recv() != "connected":
            raise RuntimeError(f"{label}: the load client did not connect")
    c = node.client()
    alice = new_account(c, node.authority())
    time.sleep(1.0)  # the account's own block reaches every client before the measure starts
    pids = family(server_pid)
    spy = None
    if profile is not None:  # the fan-out phase only (not the connections' set-up)
        spy = subprocess.Popen(
            [str(Path(sys.executable).parent / "py-spy"), "record", "-p", str(server_pid), "-f", "raw",
             "-o", str(profile), "-r", "200", "--nonblocking", "--subprocesses"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
    cpu0 = cpu_seconds(pids)
    started = time.perf_counter()
    committed: list[int] = []
    while time.perf_counter() - started < seconds:
        for m in c.commit(alice.b.account_data(pb.ACCOUNT_FIELD_BIO, f"sse {len(committed)}")):
            committed.append(int(m.block_number))
        time.sleep(0.5)
    time.sleep(3.0)  # the last block's deliveries
    cpu = cpu_seconds(pids) - cpu0
    if spy is not None:
        spy.send_signal(signal.SIGINT)
        spy.wait(60)
    for parent in pipes:
        parent.send("stop")
    got: list[tuple[int, float]] = []
    for parent in pipes:
        got.extend(parent.recv())
    for p in workers:
        p.join(30)
    wanted = set(committed)
    latencies = sorted(ms for block, ms in got if block in wanted)
    by_block: dict[int, list[float]] = {}
    for block, ms in got:
        if block in wanted:
            by_block.setdefault(block, []).append(ms)
    spread = statistics.median(max(v) - min(v) for v in by_block.values()) if by_block else float("nan")
    n = len(latencies)
    return Row(
        label,
        clients,
        len(wanted),
        n,
        latencies[n // 2] if n else float("nan"),
        latencies[min(n - 1, int(n * 0.99))] if n else float("nan"),
        spread,
        cpu / max(1, n) * 1e6,
    )


def start_gateway(
    node: NodeProcess, clients: int, workers: int, root: Path = ROOT
) -> tuple[int, subprocess.Popen[str]]:
    cmd = [
        sys.executable, "-m", "gateway.main", "--http-addr", "127.0.0.1:0", "--node-addr", node.grpc_target,
        "--node-internal-addr", node.internal_target,
        "--metrics-addr", "127.0.0.1:0", "--log-level", "warning",
        "--sse-max-per-ip", str(clients + 10), "--max-connections", str(clients + 100), "--header-timeout", "60",
    ]  # fmt: skip
    if workers > 1:
        cmd += ["--workers", str(workers)]
    proc = subprocess.Popen(
        cmd, cwd=root, env=dict(os.environ, PYTHONPATH=str(root)), stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    return int(json.loads(line)["http_port"]), proc


def stop_gateway(proc: subprocess.Popen[str]) -> None:
    started = time.perf_counter()
    proc.terminate()
    try:
        proc.wait(120)
    except subprocess.TimeoutExpired:
        print("the gateway did not stop within 120 s of SIGTERM; killed", file=sys.stderr)
        proc.kill()
        proc.wait()
    print(f"(gateway stopped {time.perf_counter() - started:.1f} s after SIGTERM)", file=sys.stderr)


def sse_rows(
    clients: int = 10_000,
    procs: int = 4,
    seconds: float = 10.0,
    workers: Sequence[int] = (1,),
    compare: Path | None = None,
    profile: Path | None = None,
) -> list[Row]:
    """The bare baseline, then the gateway with each worker count, on one node in one run (`compare`: first
    a gateway from another checkout, e.g. the code before a change; `profile`: py-spy raw samples of the
    last gateway measured, written to that file)."""
    raise_fd_limit(3 * clients + 1000)
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as d:
        node = NodeProcess(Path(d) / "node", "--block-interval", "0.1").start()
        try:
            ctx = multiprocessing.get_context("spawn")
            parent, child = ctx.Pipe()
            bare = ctx.Process(target=bare_main, args=(node.grpc_target, child), daemon=True)
            bare.start()
            port = parent.recv()
            assert bare.pid is not None
            rows.append(measure("bare aiohttp fan-out", port, bare.pid, node, clients, procs, seconds))
            parent.send("stop")
            bare.join(30)
            runs = [(1, compare, f"chain-gateway from {compare}")] if compare is not None else []
            runs += [(n, ROOT, "chain-gateway" + (f" --workers {n}" if n > 1 else "")) for n in workers]
            for i, (n, root, label) in enumerate(runs):
                port, proc = start_gateway(node, clients, n, root)
                spy = profile if i == len(runs) - 1 else None
                try:
                    rows.append(measure(label, port, proc.pid, node, clients, procs, seconds, spy))
                finally:
                    stop_gateway(proc)
        finally:
            node.stop()
    return rows


def issue_row(rows: list[Row]) -> dict[str, str]:
    """The SSE row of the goals table (bench/table.py) from `sse_rows()`: the best gateway run's p99 against
    the goal, and as a ratio to the bare fan-out of the same run (rows[0])."""
    bare, best = rows[0], min(rows[1:], key=lambda r: r.p99)
    return {
        "measure": f"{best.clients:,} SSE clients, block commit -> client p99 ({best.server})",
        "now": f"{best.p99:.0f} ms ({best.p99 / bare.p99:.2f}x the bare fan-out's {bare.p99:.0f} ms)",
        "goal": f"<= {GOAL_P99_MS:.0f} ms",
        "delivered": f"{best.deliveries:,} / {best.clients * best.blocks:,}",
    }


def print_rows(rows: list[Row]) -> None:
    print("\n| SSE /v1/events/blocks, a block every 0.5 s | clients | blocks | delivered / expected | p50 ms | "
          "p99 ms | first->last receipt ms | server CPU us/delivery |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        print(row.cells())
    bare = rows[0]
    for row in rows[1:]:
        verdict = "meets" if row.p99 <= GOAL_P99_MS else "misses"
        print(f"\n{row.server}: p99 {row.p99:.0f} ms ({verdict} the {GOAL_P99_MS:.0f} ms goal), "
              f"{row.p99 / bare.p99:.2f}x the bare fan-out's p99, p50 {row.p50 / bare.p50:.2f}x, "
              f"CPU per delivery {row.cpu_us / bare.cpu_us:.2f}x.")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--clients", type=int, default=10_000)
    parser.add_argument("--procs", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--workers", default="1", help="comma-separated gateway worker counts to run")
    parser.add_argument("--compare-root", type=Path, default=None, help="also run the gateway of this checkout")
    parser.add_argument("--profile", type=Path, default=None, help="py-spy raw samples of the last gateway run")
    ns = parser.parse_args()
    workers = [int(w) for w in ns.workers.split(",") if w]
    rows = sse_rows(ns.clients, ns.procs, ns.seconds, workers, ns.compare_root, ns.profile)
    print_rows(rows)
    if len(rows) > 1:
        row = issue_row(rows)
        print(f"\n{row['measure']}: {row['now']}; goal {row['goal']}; delivered {row['delivered']}")


if __name__ == "__main__":
    main()
