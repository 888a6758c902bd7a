"""What TLS costs: ingest and reads against a node serving TLS ÷ the same node in plaintext, in one run.

    python -m bench.bench_tls [--messages N] [--rounds R] [--clients C] [--seconds S] [--part ingest|reads]

Two nodes, one of each kind, started alike (`--tls-cert/--tls-key/--tls-client-ca` from a CA made in a temporary
directory with tests/fixtures/certs.py, or none), both up for the whole part of the run that uses them:

- ingest: bench_node's workload (signed batches of 100, follows and single-commit bundles) from `--clients`
  client processes (bench/clients.py), each keeping `--in-flight` batches in flight (2), over `grpcs://` with the CA or
  plaintext: one submit function, only the target differs. Committed msgs/s from the clients' start until a
  SubscribeBlocks stream (a process of its own, over TLS to the TLS node) has seen every message in a block's
  header count. `--rounds` rounds of `--messages` per side, the order swapped each round (plaintext first,
  then TLS first), both stores growing alike; the row is the TLS side's messages ÷ its time over the
  plaintext side's. Beside it: each round's ratio (the spread), and CPU per committed message of the node's
  process tree and of the load generator (the client processes once ready, and the watcher).
- reads: GetAccount driven by h2load (bench_reads' framed request, `https://` with ALPN h2 for the TLS node:
  h2load does not check the certificate, the node's cost is the same), both nodes with `--read-workers`.
  Each row's time is cut in `--slices` slices alternating the two sides; h2load's one-second warm-up holds
  its connections' handshakes, so the row is TLS on an open connection (as any gRPC client keeps one).
  Beside it: each slice's ratio, the node's and h2load's CPU per call (on 2 cores the load generator's TLS
  work is the node's loss too).

Both figures are ratios to the plaintext side measured in the same run, alternating, goal ≥ 0.9 (bench/table.py).
"""

from __future__ import annotations

import argparse
import functools
import multiprocessing
import resource
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import grpc

from bench.bench_node import IN_FLIGHT, settle, workload
from bench.bench_reads import SERVICE, frame, h2load, populate
from bench.clients import ClientProcesses, Load, send_all
from bench.procstat import cpu_seconds, tree_cpu_delta, tree_cpu_seconds
from bench.table import Row, emit
from chain.v1 import message_pb2 as pb
from chain.v1 import rpc_pb2, service_pb2_grpc
from node.tls import ClientTLS, aio_channel, sync_channel
from tests.fixtures.certs import TestCA
from tests.fixtures.nodeproc import NodeProcess, NodeTLSFiles

SIDES = ("plaintext", "TLS")


def client_tls(ca_file: str) -> ClientTLS | None:
    return ClientTLS(ca_file=Path(ca_file)) if ca_file else None


async def submit_over(
    target: str,
    batches: list[list[pb.Message]],
    sent: dict[bytes, float],
    rate: float = 0.0,
    *,
    ca_file: str = "",
    in_flight: int = IN_FLIGHT,
) -> int:
    """bench_node's submit on a channel to `target` as node/tls.py dials it: `grpcs://` trusts `ca_file`."""
    accepted = 0
    async with aio_channel(target, client_tls(ca_file)) as channel:
        stub = service_pb2_grpc.ChainServiceStub(channel)

        async def send(batch: list[pb.Message]) -> None:
            nonlocal accepted
            resp = await stub.BatchSubmitMessages(rpc_pb2.BatchSubmitMessagesRequest(messages=batch))
            accepted += sum(r.accepted for r in resp.results)

        await send_all(batches, sent, rate, in_flight, send)
    return accepted


def count_commits(target: str, ca_file: str, wanted: int, conn: Connection) -> None:
    """The commit watcher's process: follows SubscribeBlocks (headers only), sends back how many messages it
    saw committed and when the last block arrived, once `wanted` did or when asked to stop."""
    channel = sync_channel(target, client_tls(ca_file))
    stream: Any = service_pb2_grpc.ChainServiceStub(channel).SubscribeBlocks(rpc_pb2.SubscribeBlocksRequest())

    def stop_when_asked() -> None:
        if conn.recv() == "stop":
            stream.cancel()

    threading.Thread(target=stop_when_asked, daemon=True).start()
    conn.send("ready")
    seen, last = 0, time.perf_counter()
    try:
        for item in stream:
            seen += item.block.header.message_count
            last = time.perf_counter()
            if seen >= wanted:
                break
    except grpc.RpcError:  # cancelled: what arrived so far
        pass
    conn.send((seen, last))
    channel.close()


@dataclass
class Side:
    """One node of the comparison and how its clients dial it."""

    name: str
    node: NodeProcess
    ca_file: str  # "" for plaintext

    @property
    def target(self) -> str:
        return self.node.grpcs_target if self.ca_file else self.node.grpc_target

    @property
    def pid(self) -> int:
        assert self.node.proc is not None
        return self.node.proc.pid


@dataclass
class Totals:
    """A side's sums over its phases or slices."""

    count: float = 0.0  # committed messages, or calls
    seconds: float = 0.0
    node_cpu: float = 0.0
    load_cpu: float = 0.0  # the load generator's: client processes and watcher (ingest), h2load (reads)
    cpu_calls: float = 0.0  # calls the reads' CPU covers: h2load's warm-up as well, at the rate measured after it
    rates: list[float] = field(default_factory=list)  # each phase's or slice's own rate, in order

    @property
    def rate(self) -> float:
        return self.count / self.seconds if self.seconds else 0.0

    def per_call(self, cpu: float) -> str:
        return per(cpu, self.cpu_calls)


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)  # ended children only: h2load runs, load clients
    return usage.ru_utime + usage.ru_stime


def ingest_phase(side: Side, load: Load, totals: Totals, in_flight: int = IN_FLIGHT) -> None:
    """One saturated phase against `side`, added to `totals`."""
    wanted = sum(len(b) for batches in load for b in batches)
    ctx = multiprocessing.get_context("spawn")
    mine, theirs = ctx.Pipe()
    watcher = ctx.Process(target=count_commits, args=(side.target, side.ca_file, wanted, theirs), daemon=True)
    watcher.start()
    if mine.recv() != "ready":
        raise RuntimeError("the commit watcher did not start")
    submit = functools.partial(submit_over, ca_file=side.ca_file, in_flight=in_flight)
    clients = ClientProcesses(submit, [side.target], load)
    time.sleep(0.3)
    # the load generator's CPU from here: its processes so far (started, batches decoded), then all of it once
    # they have ended and been reaped
    load_before = children_cpu() + sum(cpu_seconds(p) for p in [*clients.pids, watcher.pid] if p is not None)
    before = tree_cpu_seconds(side.pid)
    sent = clients.run()
    if not mine.poll(120):
        mine.send("stop")
    committed, done = mine.recv()
    watcher.join(10)
    totals.load_cpu += children_cpu() - load_before
    totals.node_cpu += tree_cpu_delta(before, tree_cpu_seconds(side.pid))
    totals.count += committed
    totals.seconds += done - sent.start
    totals.rates.append(committed / (done - sent.start))
    if committed < wanted:
        print(f"{side.name}: {committed:,} of {wanted:,} messages seen committed within 120 s", flush=True)


@contextmanager
def two_nodes(work: Path, *args: str, timeout: float = 60.0) -> Iterator[list[Side]]:
    """A plaintext node and a TLS node (certificates from a CA in `work`), both with `args`."""
    ca = TestCA.make(work / "pki")
    tls = NodeTLSFiles.issue(ca, "node")
    nodes = [NodeProcess(work / "plain", *args), NodeProcess(work / "tls", *args, tls=tls)]
    try:
        for node in nodes:
            node.start(timeout=timeout)
        yield [Side(SIDES[0], nodes[0], ""), Side(SIDES[1], nodes[1], str(tls.ca))]
    finally:
        for node in nodes:
            node.stop()


def ingest(ns: argparse.Namespace, work: Path) -> dict[str, Totals]:
    totals = {name: Totals() for name in SIDES}
    with two_nodes(work / "ingest", "--web-addr", "", "--block-interval", "0.2") as sides:
        for r in range(ns.rounds):
            loads = [workload(side.node, ns.clients, ns.messages) for side in sides]  # signed before either phase
            for i in (0, 1) if r % 2 == 0 else (1, 0):
                settle(sides[i].pid)
                ingest_phase(sides[i], loads[i], totals[sides[i].name], ns.in_flight)
    return totals


def reads(ns: argparse.Namespace, work: Path) -> tuple[dict[str, Totals], int]:
    """GetAccount calls/s of each side, alternating in `ns.slices` slices; and the response's size."""
    totals = {name: Totals() for name in SIDES}
    part = max(1, round(ns.seconds / ns.slices))  # h2load -D takes whole seconds
    with two_nodes(work / "reads", "--read-workers", str(ns.read_workers), timeout=180) as sides:
        urls: list[str] = []
        bodies: list[Path] = []
        for side in sides:
            request, check = populate(side.node)["GetAccount"]
            bodies.append(work / f"GetAccount-{side.name}.bin")
            bodies[-1].write_bytes(frame(request))
            with sync_channel(side.target, client_tls(side.ca_file)) as channel:
                size = len(check(service_pb2_grpc.ChainServiceStub(channel)).SerializeToString())  # answered OK
            scheme = "https" if side.ca_file else "http"
            urls.append(f"{scheme}://{side.node.grpc_target}{SERVICE}/GetAccount")
            h2load(urls[-1], bodies[-1], 2, ns.connections, ns.streams, ns.threads)  # every process warmed up
        for s in range(ns.slices):
            for i in (0, 1) if s % 2 == 0 else (1, 0):
                cpu, load_cpu, started = tree_cpu_seconds(sides[i].pid), children_cpu(), time.perf_counter()
                qps = h2load(urls[i], bodies[i], part, ns.connections, ns.streams, ns.threads)
                t = totals[sides[i].name]
                t.cpu_calls += qps * (time.perf_counter() - started)
                t.node_cpu += tree_cpu_delta(cpu, tree_cpu_seconds(sides[i].pid))
                t.load_cpu += children_cpu() - load_cpu
                t.count += qps * part
                t.rates.append(qps)
                t.seconds += part
    return totals, size


def per(cpu: float, count: float) -> str:
    return f"{cpu / count * 1e6:,.0f} µs" if count else "-"


def spread(tls: list[float], plain: list[float]) -> str:
    """Each phase's ratio to its plaintext twin (the same round or slice)."""
    return ", ".join(f"{t:,.0f} ÷ {p:,.0f} = {t / p:.2f}" for t, p in zip(tls, plain, strict=True))


def report_ingest(ns: argparse.Namespace, plain: Totals, tls: Totals) -> None:
    print(f"\n### TLS on and off, ingest: {ns.rounds} rounds of {ns.messages:,} messages per side")
    print(f"({ns.clients} client processes, batches of 100, {ns.in_flight} in flight each)\n")
    print("| measure | plaintext | TLS | TLS ÷ plaintext |")
    print("|---|---:|---:|---:|")
    print(f"| committed msgs/s | {plain.rate:,.0f} | {tls.rate:,.0f} | {tls.rate / plain.rate:.3f} |")
    print(f"| node CPU per message | {per(plain.node_cpu, plain.count)} | {per(tls.node_cpu, tls.count)} | |")
    print(f"| load clients' CPU per message | {per(plain.load_cpu, plain.count)} | {per(tls.load_cpu, tls.count)} | |")
    print(f"\neach round's msgs/s, TLS ÷ plaintext: {spread(tls.rates, plain.rates)}")
    load = (
        f"{ns.clients} client processes, {ns.in_flight} batches in flight each, {ns.rounds} rounds of {ns.messages:,}"
    )
    emit(
        Row(
            "tls_ingest_ratio",
            tls.rate / plain.rate,
            f"{tls.rate:,.0f} ÷ {plain.rate:,.0f} msgs/s ({load} msgs per side); CPU per message with TLS and "
            f"without: node {per(tls.node_cpu, tls.count)} and {per(plain.node_cpu, plain.count)} (its Ed25519 "
            f"verifies the bound), load clients {per(tls.load_cpu, tls.count)} and {per(plain.load_cpu, plain.count)}",
        )
    )


def report_reads(ns: argparse.Namespace, plain: Totals, tls: Totals, size: int) -> None:
    load = f"h2load -c{ns.connections} -m{ns.streams} -t{ns.threads}"
    print(f"\n### TLS on and off, reads: GetAccount ({size}-byte response) by {load}, {ns.seconds:g} s per side")
    print(f"in {ns.slices} alternating slices, --read-workers {ns.read_workers}\n")
    print("| measure | plaintext | TLS | TLS ÷ plaintext |")
    print("|---|---:|---:|---:|")
    print(f"| GetAccount calls/s | {plain.rate:,.0f} | {tls.rate:,.0f} | {tls.rate / plain.rate:.3f} |")
    print(f"| node CPU per call | {plain.per_call(plain.node_cpu)} | {tls.per_call(tls.node_cpu)} | |")
    print(f"| h2load CPU per call | {plain.per_call(plain.load_cpu)} | {tls.per_call(tls.load_cpu)} | |")
    print(f"\neach slice's calls/s, TLS ÷ plaintext: {spread(tls.rates, plain.rates)}")
    emit(
        Row(
            "tls_reads_ratio",
            tls.rate / plain.rate,
            f"{tls.rate:,.0f} ÷ {plain.rate:,.0f} calls/s ({load}, {ns.seconds:g} s per side, --read-workers "
            f"{ns.read_workers}); CPU per call with TLS and without: node {tls.per_call(tls.node_cpu)} and "
            f"{plain.per_call(plain.node_cpu)} (grpc.aio's per-call work the bound), h2load "
            f"{tls.per_call(tls.load_cpu)} and {plain.per_call(plain.load_cpu)} on the same 2 cores",
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=10_000, help="messages per side and round")
    parser.add_argument("--rounds", type=int, default=6, help="alternations of the two sides in the ingest row")
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--in-flight", type=int, default=IN_FLIGHT, help="batches in flight per client")
    parser.add_argument("--seconds", type=float, default=12.0, help="h2load seconds per side")
    parser.add_argument("--slices", type=int, default=4, help="alternations of the two sides in the reads row")
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--streams", type=int, default=8, help="concurrent calls per connection (h2load -m)")
    parser.add_argument("--threads", type=int, default=1, help="h2load threads")
    parser.add_argument("--read-workers", type=int, default=2)
    parser.add_argument("--part", choices=("ingest", "reads"), action="append", help="only these (default: both)")
    ns = parser.parse_args()
    parts = ns.part or ["ingest", "reads"]
    assert "reads" not in parts or shutil.which("h2load"), (
        "h2load is not installed (make bench installs the Debian package nghttp2-client)"
    )
    with tempfile.TemporaryDirectory() as d:
        if "ingest" in parts:
            ing = ingest(ns, Path(d))
            report_ingest(ns, ing[SIDES[0]], ing[SIDES[1]])
        if "reads" in parts:
            rd, size = reads(ns, Path(d))
            report_reads(ns, rd[SIDES[0]], rd[SIDES[1]], size)


if __name__ == "__main__":
    main()
