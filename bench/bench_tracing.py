"""The node benchmark with tracing off and on: the cost of tracing, as ratios (on / off) from one run.

    python -m bench.bench_tracing [--messages N] [--clients C] [--rounds R]

Each round runs the node benchmark's traffic (bench/bench_node.py: BatchSubmitMessages of 100 from C
clients, then a paced phase for the submit -> committed latency, then GetAccount QPS) against a fresh
`chain-node` twice: tracing off (no OTEL_EXPORTER_OTLP_ENDPOINT: the default), and tracing on, exporting
every span (no sampling) over OTLP/gRPC through the SDK's BatchSpanProcessor to an OTLP sink in its own
process (a TraceService that decodes and counts the spans, standing in for a collector), and tracing on
with 10% of the request traces sampled (OTEL_TRACES_SAMPLER_ARG=0.1). Metrics are on in all three (the
default). The best of the rounds is kept for each mode, and the order of the modes rotates.

Besides rates and latencies, which swing with whatever else runs on the machine, it reports the CPU time
the node's processes (the node and its verification workers, from /proc) spend per committed message in
the saturated phase and per GetAccount call: the cost of tracing itself, and much steadier on a shared host.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import sys
import tempfile
import threading
import time
from concurrent import futures
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

from bench.bench_node import BATCH, unary_qps, workload, write_phase
from chain.v1 import rpc_pb2
from tests.fixtures.nodeproc import NodeProcess


class Sink(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self) -> None:
        self.spans = 0
        self.lock = threading.Lock()

    def Export(self, request: Any, context: Any) -> Any:
        n = sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans)
        with self.lock:
            self.spans += n
        return trace_service_pb2.ExportTraceServiceResponse()


def sink_main(conn: Connection) -> None:
    """An OTLP trace sink in its own process: sends its port, then answers each request with the span count."""
    sink = Sink()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(sink, server)  # type: ignore[no-untyped-call]
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    conn.send(port)
    while conn.recv() != "stop":
        conn.send(sink.spans)
    server.stop(0)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process and its live children (Linux /proc)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue  # gone meanwhile
        if int(entry.name) == pid or int(fields[1]) == pid:  # fields[1] is the parent's pid
            total += (int(fields[11]) + int(fields[12])) / tick
    return total


def run_once(clients: int, messages: int, paced_rate: float, env: dict[str, str]) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as d:
        node = NodeProcess(Path(d) / "data", "--web-addr", "", "--block-interval", "0.2", env=env).start()
        try:
            assert node.proc is not None
            pid = node.proc.pid
            per_client = workload(node, clients, messages)
            cpu = cpu_seconds(pid)
            w = write_phase(node, per_client)
            cpu_per_message = (cpu_seconds(pid) - cpu) / max(1.0, w["committed"])
            paced = write_phase(node, workload(node, clients, int(paced_rate * 5)), rate=paced_rate)
            some = per_client[0][0][0]
            account = rpc_pb2.GetAccountRequest(owner_address=some.data.owner_address)
            cpu = cpu_seconds(pid)
            qps = asyncio.run(
                unary_qps(
                    node.grpc_target, "/chain.v1.ChainService/GetAccount", account, rpc_pb2.GetAccountResponse, 3, 8
                )
            )
            cpu_per_read = (cpu_seconds(pid) - cpu) / max(1.0, qps * 3)
        finally:
            node.stop()
    return {
        "submit": w["submit_rate"],
        "commit": w["commit_rate"],
        "p50": paced["p50_ms"],
        "p99": paced["p99_ms"],
        "qps": qps,
        "cpu_msg": cpu_per_message * 1e6,
        "cpu_read": cpu_per_read * 1e6,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--paced-rate", type=float, default=1000.0)
    ns = parser.parse_args()
    ctx = multiprocessing.get_context("spawn")
    conn, child = ctx.Pipe()
    proc = ctx.Process(target=sink_main, args=(child,), daemon=True)
    proc.start()
    export = {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{conn.recv()}", "OTEL_EXPORTER_OTLP_INSECURE": "true"}
    modes: dict[str, dict[str, str]] = {
        "off": {},
        "on": export,
        "sampled": export | {"OTEL_TRACES_SAMPLER_ARG": "0.1"},
    }
    best: dict[str, dict[str, float]] = {mode: {} for mode in modes}
    higher = {"submit", "commit", "qps"}  # the others: lower is better
    try:
        for r in range(ns.rounds):
            order = list(modes)
            for mode in order[r % 3 :] + order[: r % 3]:
                print(f"round {r + 1}: tracing {mode}...", file=sys.stderr, flush=True)
                got = run_once(ns.clients, ns.messages, ns.paced_rate, modes[mode])
                for k, v in got.items():
                    old = best[mode].get(k)
                    if old is None or (v > old if k in higher else v < old):
                        best[mode][k] = v
        time.sleep(1.0)  # the last batch of spans: exported on shutdown, counted by the sink
        conn.send("count")
        spans = int(conn.recv())
    finally:
        conn.send("stop")
        proc.join(10)

    off, on, sampled = best["off"], best["on"], best["sampled"]
    print(
        f"\n### Tracing off vs on: node benchmark, {ns.messages:,} messages, {ns.clients} clients, batches of {BATCH}"
    )
    print(f"best of {ns.rounds} rounds each; spans exported over OTLP/gRPC to a sink ({spans:,} spans in all)\n")
    print("| measure | tracing off | tracing on, every trace | on / off | on, 10% sampled | sampled / off |")
    print("|---|---:|---:|---:|---:|---:|")
    rows = [
        ("submitted msgs/s (BatchSubmitMessages)", "submit", "{:,.0f}"),
        ("committed msgs/s", "commit", "{:,.0f}"),
        ("GetAccount QPS (8 concurrent)", "qps", "{:,.0f}"),
        (f"paced {ns.paced_rate:,.0f} msgs/s: submit -> committed p50 (ms)", "p50", "{:,.0f}"),
        (f"paced {ns.paced_rate:,.0f} msgs/s: submit -> committed p99 (ms)", "p99", "{:,.0f}"),
        ("node CPU per committed message (µs, saturated phase)", "cpu_msg", "{:,.0f}"),
        ("node CPU per GetAccount call (µs)", "cpu_read", "{:,.0f}"),
    ]
    for label, key, fmt in rows:
        cells = [fmt.format(off[key]), fmt.format(on[key]), f"{on[key] / off[key]:.2f}"]
        cells += [fmt.format(sampled[key]), f"{sampled[key] / off[key]:.2f}"]
        print(f"| {label} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
