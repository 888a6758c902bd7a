"""Start-up: chain-node start → SERVING on an empty store, and what each command imports before it works.

    python -m bench.bench_startup [--runs N]

- start → SERVING: spawn ``chain-node`` (the installed console script) on a fresh, empty data directory
  with its public gRPC port chosen beforehand, and poll ``grpc.health.v1.Health/Check`` (service "") on
  that port every 10 ms until it answers SERVING; N runs, median and spread. The same-run baseline is a
  bare grpc.aio server with only the health service, spawned and polled the same way (what any Python
  gRPC server costs to come up on this machine);
- command start-up: wall time of ``chainctl --help``, ``chainctl keys list`` (a command that runs, offline,
  on an empty key store), ``chain-node --help`` and ``chain-gateway --help``, median of N, next to a bare
  ``python -c pass``. ``python -X importtime`` tells which imports the time goes to (docs/performance.md,
  "Start-up").
The machine is shared: the figures are noisy, the medians are the ones to compare; the node's CPU time
until SERVING (its process and its children, from /proc) moves less with the load than wall time does.

Bytecode: the children run without PYTHONDONTWRITEBYTECODE and one untimed run of each goes first, so
every figure is with compiled bytecode, as in the image (UV_COMPILE_BYTECODE=1 in the Dockerfile); an
environment that forbids writing .pyc files pays the compilation on every start (several seconds).
`--source DIR` measures another checkout of the project (e.g. `git archive main | tar -x -C DIR`) with
this interpreter, for before/after figures taken in the same conditions.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from bench.procstat import tree_cpu_delta, tree_cpu_seconds
from bench.table import Row, emit
from tests.fixtures.procs import free_port, stop_process

BIN = Path(sys.executable).parent
HERE = Path(__file__).resolve().parents[1]
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


def child_env(source: Path) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(source))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def time_to_serving(cmd: Sequence[str], port: int, source: Path) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the process tree) from spawn to SERVING."""
    started = time.perf_counter()
    proc = subprocess.Popen(
        list(cmd), cwd=source, env=child_env(source), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        until_serving(port, proc)
        wall = time.perf_counter() - started
        return wall, tree_cpu_delta({}, tree_cpu_seconds(proc.pid))
    finally:
        stop_process(proc, 30)


def node_cmd(data_dir: Path, port: int) -> list[str]:
    return [
        str(BIN / "chain-node"), "--data-dir", str(data_dir), "--grpc-addr", f"127.0.0.1:{port}",
        "--web-addr", f"127.0.0.1:{free_port()}", "--admin-addr", f"127.0.0.1:{free_port()}",
        "--internal-addr", f"127.0.0.1:{free_port()}",
        "--metrics-addr", f"127.0.0.1:{free_port()}",
    ]  # fmt: skip


def serving_times(runs: int, source: Path) -> tuple[list[tuple[float, float]], list[tuple[float, float]]]:
    """(wall, CPU) of each timed run, the node's and the bare server's, interleaved; one untimed run first."""
    node: list[tuple[float, float]] = []
    bare: list[tuple[float, float]] = []
    for _ in range(runs + 1):
        with tempfile.TemporaryDirectory() as d:
            port = free_port()
            node.append(time_to_serving(node_cmd(Path(d) / "data", port), port, source))
        port = free_port()
        bare.append(time_to_serving([sys.executable, "-c", BARE_SERVER, f"127.0.0.1:{port}"], port, source))
    return node[1:], bare[1:]


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def command_time(cmd: Sequence[str], runs: int, env: dict[str, str]) -> tuple[float, float]:
    """Median (wall, CPU) seconds of a command run to completion, after one untimed run."""
    times, cpus = [], []
    subprocess.run(list(cmd), env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(runs):
        started, cpu = time.perf_counter(), children_cpu()
        subprocess.run(list(cmd), env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times.append(time.perf_counter() - started)
        cpus.append(children_cpu() - cpu)
    return statistics.median(times), statistics.median(cpus)


def command_times(runs: int, source: Path) -> list[tuple[str, tuple[float, float]]]:
    with tempfile.TemporaryDirectory() as home:
        env = dict(child_env(source), CHAINCTL_HOME=home)
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
    parser.add_argument("--source", type=Path, default=HERE, help="the checkout to measure (default: this one)")
    ns = parser.parse_args()
    source = ns.source.resolve()
    node, bare = serving_times(ns.runs, source)
    commands = command_times(ns.runs, source)
    med, bare_med = statistics.median(w for w, _ in node), statistics.median(w for w, _ in bare)
    print(f"\n### chain-node start → SERVING, empty store, {ns.runs} runs (a shared machine; {source})\n")
    print("| | median s | min s | max s | median CPU s (process tree) |")
    print("|---|---:|---:|---:|---:|")
    for label, runs in (("chain-node", node), ("bare grpc.aio health server (baseline)", bare)):
        walls = [w for w, _ in runs]
        cpu = statistics.median(c for _, c in runs)
        print(f"| {label} | {statistics.median(walls):.2f} | {min(walls):.2f} | {max(walls):.2f} | {cpu:.2f} |")
    print(f"\n### Command start-up, median of {ns.runs}\n")
    print("| command | wall ms | CPU ms | CPU over a bare interpreter, ms |")
    print("|---|---:|---:|---:|")
    base = commands[0][1][1]
    for label, (wall, cpu) in commands:
        print(f"| {label} | {wall * 1000:.0f} | {cpu * 1000:.0f} | {(cpu - base) * 1000:.0f} |")
    emit(Row("start_serving", med, f"median of {ns.runs}; bare grpc.aio health server {bare_med:.2f} s"))


if __name__ == "__main__":
    main()
