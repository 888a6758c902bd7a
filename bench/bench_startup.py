"""Start-up: chain-node start → SERVING on an empty store, and what each command imports before it works.

    python -m bench.bench_startup [--runs N]

- start → SERVING: spawn ``chain-node`` (the installed console script) on a fresh, empty data directory
  with its public gRPC port chosen beforehand, and poll ``grpc.health.v1.Health/Check`` (service "") on
  that port every 10 ms until it answers SERVING; N runs, median and spread. The same-run baseline is a
  bare grpc.aio server with only the health service, spawned and polled the same way (what any Python
  gRPC server costs to come up on this machine);
- command start-up: wall time of ``chainctl --help``, ``chainctl keys list`` (a command that runs, offline,
  on an empty key store), ``chain-node --help`` and ``chain-gateway --help``, median of N, next to a bare
  ``python -c pass``. ``python -X importtime`` tells which imports the time goes to (docs/performance.md).
The machine is shared: the figures are noisy, the medians are the ones to compare.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from bench.table import Row, emit
from tests.fixtures.procs import free_port, stop_process

BIN = Path(sys.executable).parent
ROOT = Path(__file__).resolve().parents[1]
POLL_OPTIONS = [
    ("grpc.initial_reconnect_backoff_ms", 10),
    ("grpc.min_reconnect_backoff_ms", 10),
    ("grpc.max_reconnect_backoff_ms", 20),
]
BARE_SERVER = """
import asyncio, sys
import grpc
from grpc_health.v1 import health, health_pb2_grpc

async def main():
    server = grpc.aio.server()
    health_pb2_grpc.add_HealthServicer_to_server(health.aio.HealthServicer(), server)
    server.add_insecure_port(sys.argv[1])
    await server.start()
    await server.wait_for_termination()

asyncio.run(main())
"""


def until_serving(port: int, proc: subprocess.Popen[bytes], timeout: float = 60.0) -> None:
    """Return once Health/Check("") on 127.0.0.1:port answers SERVING."""
    deadline = time.monotonic() + timeout
    with grpc.insecure_channel(f"127.0.0.1:{port}", options=POLL_OPTIONS) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"exited with {proc.returncode} before serving")
            try:
                answer = stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=0.5)
                if answer.status == health_pb2.HealthCheckResponse.SERVING:
                    return
            except grpc.RpcError:
                pass
            time.sleep(0.01)
    raise TimeoutError("not SERVING in time")


def time_to_serving(cmd: Sequence[str], port: int) -> float:
    started = time.perf_counter()
    proc = subprocess.Popen(
        list(cmd), cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        until_serving(port, proc)
        return time.perf_counter() - started
    finally:
        stop_process(proc, 30)


def node_cmd(data_dir: Path, port: int) -> list[str]:
    return [
        str(BIN / "chain-node"), "--data-dir", str(data_dir), "--grpc-addr", f"127.0.0.1:{port}",
        "--web-addr", f"127.0.0.1:{free_port()}", "--admin-addr", f"127.0.0.1:{free_port()}",
        "--metrics-addr", f"127.0.0.1:{free_port()}",
    ]  # fmt: skip


def serving_times(runs: int) -> tuple[list[float], list[float]]:
    node: list[float] = []
    bare: list[float] = []
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as d:
            port = free_port()
            node.append(time_to_serving(node_cmd(Path(d) / "data", port), port))
        port = free_port()
        bare.append(time_to_serving([sys.executable, "-c", BARE_SERVER, f"127.0.0.1:{port}"], port))
    return node, bare


def command_time(cmd: Sequence[str], runs: int, env: dict[str, str]) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(list(cmd), env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def command_times(runs: int) -> list[tuple[str, float]]:
    with tempfile.TemporaryDirectory() as home:
        env = dict(os.environ, CHAINCTL_HOME=home)
        cases = [
            ("python -c pass (bare interpreter)", [sys.executable, "-c", "pass"]),
            ("chainctl --help", [str(BIN / "chainctl"), "--help"]),
            ("chainctl keys list (empty key store)", [str(BIN / "chainctl"), "keys", "list"]),
            ("chain-node --help", [str(BIN / "chain-node"), "--help"]),
            ("chain-gateway --help", [str(BIN / "chain-gateway"), "--help"]),
        ]
        return [(label, command_time(cmd, runs, env)) for label, cmd in cases]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7)
    ns = parser.parse_args()
    node, bare = serving_times(ns.runs)
    commands = command_times(ns.runs)
    med, bare_med = statistics.median(node), statistics.median(bare)
    print(f"\n### chain-node start → SERVING, empty store, {ns.runs} runs (a shared machine)\n")
    print("| | median s | min s | max s |")
    print("|---|---:|---:|---:|")
    print(f"| chain-node | {med:.2f} | {min(node):.2f} | {max(node):.2f} |")
    print(f"| bare grpc.aio health server (baseline) | {bare_med:.2f} | {min(bare):.2f} | {max(bare):.2f} |")
    print(f"\n### Command start-up, median of {ns.runs}\n")
    print("| command | wall ms | over a bare interpreter, ms |")
    print("|---|---:|---:|")
    base = commands[0][1]
    for label, seconds in commands:
        print(f"| {label} | {seconds * 1000:.0f} | {(seconds - base) * 1000:.0f} |")
    emit(Row("start_serving", med, f"median of {ns.runs}; bare grpc.aio health server {bare_med:.2f} s"))


if __name__ == "__main__":
    main()
