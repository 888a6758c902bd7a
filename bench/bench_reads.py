"""gRPC unary read throughput of the node next to a bare grpc.aio echo server, driven by `h2load`.

    python -m bench.bench_reads [--seconds S] [--connections C] [--streams M] [--read-workers N]

Baseline: a single-process grpc.aio server (no interceptors) whose one unary method answers a precomputed
response of the size of the node's GetAccount response, measured alternately with each row: the row's time is
cut in slices, each the echo then the node (the machine is shared and its load moves within seconds: a
baseline taken once says little). Then GetAccount, GetProject and GetOperationProof (of the account's state
key) against one node store, served first by the main process alone (`--read-workers 0`), then by the node
with its default flags (read workers sized from the CPUs and memory it may use,
node/server/readers/supervisor.py; `--read-workers N` here runs N instead), the main process restarted on
the same store. The rows are the defaults'. Every row is QPS ÷ the echo's QPS, all in one run. `h2load`
(Debian `nghttp2-client`, installed by `make bench`) sends each call as a framed gRPC request read from a
file: the 5-byte prefix (not compressed, big-endian length) and the serialised request; one checked call
through a gRPC client before each row proves the request is answered OK (h2load sees HTTP 200 whatever the
grpc-status).

Then, with the read workers still serving, GetAccount through the real Envoy (envoy/envoy.yaml's cluster
settings, one Envoy worker thread as in tests/envoy) and through the same Envoy with the cluster settings
it had before 2026-11-29 (up to 1000 calls on one upstream connection, none retired): calls/s and each read
worker's CPU. Printed, not a row (docs/node.md, "Read workers", behind Envoy).

The rows' requests repeat on an idle chain, so after its first call each is answered from the workers'
answer memo (node/server/readers/answers.py: kept until the next write to the store). The same three rows
are then run on the workers restarted with `--read-answer-bytes 0`, every call read as the first after a
write is: printed and named in each row's text, not the rows.

Last, with the node stopped, the ceiling: two echo processes on one port (SO_REUSEPORT, uvloop: the read
workers' set-up with nothing behind a call) ÷ the echo, in the same slices. It is printed beside the rows,
not a row: what two grpc.aio processes, h2load and grpc's own threads make of this machine's cores.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import multiprocessing
import re
import shutil
import socket
import struct
import subprocess
import tempfile
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, NamedTuple

import grpc
import uvloop

from bench.children import end_children
from bench.procstat import cpu_seconds
from bench.table import Row, emit
from chain.v1 import rpc_pb2, service_pb2_grpc
from node.server.readers.supervisor import WORKER_MODULE
from node.storage import schema
from tests.fixtures.actors import new_account
from tests.fixtures.envoyproc import EnvoyProcess, render
from tests.fixtures.nodeproc import NodeProcess
from tests.fixtures.procs import children_running

ECHO_METHOD = "/bench.Echo/Echo"
TABLE_KEYS = {"GetAccount": "get_account_ratio", "GetProject": "get_project_ratio",
              "GetOperationProof": "operation_proof_ratio"}  # fmt: skip
SERVICE = "/chain.v1.ChainService"


def frame(payload: bytes) -> bytes:
    """One gRPC length-prefixed message: flag 0 (not compressed), 4-byte big-endian length, the bytes."""
    return struct.pack(">BI", 0, len(payload)) + payload


def h2load(url: str, body: Path, seconds: float, connections: int, streams: int, threads: int) -> float:
    """Requests/s of one h2load run (all answered: h2load reports failures, which fail the bench)."""
    out = subprocess.run(
        ["h2load", "-d", str(body), "-H", "content-type: application/grpc", "-H", "te: trailers",
         "-c", str(connections), "-m", str(streams), "-t", str(threads), "-D", f"{seconds:g}",
         "--warm-up-time", "1", url],
        check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    done = re.search(r"finished in [\d.]+\w+, ([\d.]+) req/s", out)
    failed = re.search(r"requests: .* (\d+) failed, (\d+) errored", out)
    assert done is not None, out
    assert failed is not None and failed.group(1) == "0" and failed.group(2) == "0", out
    return float(done.group(1))


def echo_main(response: bytes, conn: Connection, port: int = 0) -> None:
    """The baseline server's process: reports its port, serves until its pipe closes. With `port`, one of a
    group on that port (SO_REUSEPORT) running uvloop, as the node's read workers do (the ceiling's pair)."""

    async def serve() -> None:
        async def echo(_request: bytes, _context: Any) -> bytes:
            return response

        handler = grpc.method_handlers_generic_handler(
            "bench.Echo", {"Echo": grpc.unary_unary_rpc_method_handler(echo)}
        )
        server = grpc.aio.server(options=[("grpc.so_reuseport", 1 if port else 0)])
        server.add_generic_rpc_handlers((handler,))
        bound = server.add_insecure_port(f"127.0.0.1:{port}")
        await server.start()
        conn.send(bound)
        with contextlib.suppress(EOFError):  # EOF: the bench is done
            await asyncio.to_thread(conn.recv_bytes)
        await server.stop(1.0)  # without grace, calls h2load just cut short printed a CancelledError each

    if port:
        uvloop.run(serve())
    else:
        asyncio.run(serve())


class Echo:
    """The baseline server in its own process, kept up for the whole run: measured alternately with each row.
    With `processes=2`, two of them on one port: the ceiling of two processes on this machine (`measure`)."""

    def __init__(self, response: bytes, request: bytes, work: Path, processes: int = 1) -> None:
        ctx = multiprocessing.get_context("spawn")
        self._parents: list[Connection] = []
        self._procs: list[multiprocessing.process.BaseProcess] = []
        anchor = None
        port = 0
        if processes > 1:  # a bound, never-listening SO_REUSEPORT socket holds the port until they listen
            anchor = socket.socket()
            anchor.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            anchor.bind(("127.0.0.1", 0))
            port = anchor.getsockname()[1]
        try:
            for _ in range(processes):
                parent, child = ctx.Pipe()
                proc = ctx.Process(target=echo_main, args=(response, child, port), daemon=True)
                proc.start()
                self._parents.append(parent)
                self._procs.append(proc)
                self.port = int(parent.recv())
        except BaseException:
            self.close()
            raise
        finally:
            if anchor is not None:
                anchor.close()
        with grpc.insecure_channel(f"127.0.0.1:{self.port}") as channel:
            assert channel.unary_unary(ECHO_METHOD, None, None)(request, timeout=10) == response
        self._body = work / "echo.bin"
        self._body.write_bytes(frame(request))

    def qps(self, ns: argparse.Namespace, seconds: float) -> float:
        url = f"http://127.0.0.1:{self.port}{ECHO_METHOD}"
        return h2load(url, self._body, seconds, ns.connections, ns.streams, ns.threads)

    def close(self) -> None:
        end_children(self._parents, self._procs)


Calls = dict[str, tuple[bytes, Callable[[service_pb2_grpc.ChainServiceStub], Any]]]


def populate(node: NodeProcess) -> Calls:
    """An account with a project; the three calls measured, as request bytes and a checked client call."""
    c = node.client()
    alice = new_account(c, node.authority())
    project_id = c.commit(alice.b.project_create("bench", "a project to read"))[0].message.hash
    account = rpc_pb2.GetAccountRequest(owner_address=alice.address)
    project = rpc_pb2.GetProjectRequest(project_id=project_id)
    proof = rpc_pb2.GetOperationProofRequest(key=schema.account_key(alice.address))
    return {
        "GetAccount": (account.SerializeToString(), lambda s: s.GetAccount(account, timeout=10)),
        "GetProject": (project.SerializeToString(), lambda s: s.GetProject(project, timeout=10)),
        "GetOperationProof": (proof.SerializeToString(), lambda s: s.GetOperationProof(proof, timeout=10)),
    }


Pair = tuple[float, float]  # (node calls/s, echo calls/s in the slices between)


class EnvoyRun(NamedTuple):
    qps: float
    worker_cpu: list[float]  # seconds, per read worker


def node_rows(node: NodeProcess, calls: Calls, echo: Echo, work: Path, ns: argparse.Namespace) -> dict[str, Pair]:
    out: dict[str, Pair] = {}
    with grpc.insecure_channel(node.grpc_target) as channel:
        stub = service_pb2_grpc.ChainServiceStub(channel)
        for method, (request, check) in calls.items():
            check(stub)  # answered OK (raises otherwise)
            body = work / f"{method}.bin"
            body.write_bytes(frame(request))
            url = f"http://{node.grpc_target}{SERVICE}/{method}"
            if not out:  # every process of the node warmed up (first calls, connections) before any row
                h2load(url, body, 2, ns.connections, ns.streams, ns.threads)
            load = functools.partial(h2load, url, body, connections=ns.connections, streams=ns.streams)
            out[method] = interleaved(functools.partial(_slice, load, ns.threads), echo, ns)
    return out


def _slice(load: Callable[..., float], threads: int, seconds: float) -> float:
    return load(seconds=seconds, threads=threads)


def interleaved(node_qps: Callable[[float], float], echo: Echo, ns: argparse.Namespace) -> Pair:
    """The row's time cut in `ns.slices` slices, each the echo then the node, summed: the machine is shared
    and its load moves within seconds, so each side sees the same moments (a baseline taken once before the
    row, as the first two passes did, moved the ratio by up to ±40% from run to run)."""
    part = max(1, round(ns.seconds / ns.slices))  # h2load -D takes whole seconds
    node_sum = echo_sum = 0.0
    for _ in range(ns.slices):
        echo_sum += echo.qps(ns, part)
        node_sum += node_qps(part)
    return node_sum / ns.slices, echo_sum / ns.slices


class Measured(NamedTuple):
    alone: dict[str, Pair]  # --read-workers 0
    rows: dict[str, Pair]  # the node's defaults (or --read-workers N)
    workers: int  # read workers the node ran for `rows`
    unkept: dict[str, Pair]  # the same workers with --read-answer-bytes 0


def workers_of(node: NodeProcess) -> set[int]:
    assert node.proc is not None
    return children_running(node.proc.pid, WORKER_MODULE)


def measure(ns: argparse.Namespace) -> tuple[Measured, int, Pair, dict[str, EnvoyRun]]:
    with tempfile.TemporaryDirectory() as d:
        work, data = Path(d), Path(d) / "node"
        node = NodeProcess(data, read_workers=0).start()
        echo: Echo | None = None
        try:
            calls = populate(node)
            with grpc.insecure_channel(node.grpc_target) as channel:
                stub = service_pb2_grpc.ChainServiceStub(channel)
                response_size = len(calls["GetAccount"][1](stub).SerializeToString())
            echo = Echo(b"\x00" * response_size, calls["GetAccount"][0], work)
            alone = node_rows(node, calls, echo, work, ns)
            node.stop()
            node = NodeProcess(data, read_workers=ns.read_workers).start(timeout=180)
            workers = len(workers_of(node))
            measured = node_rows(node, calls, echo, work, ns)
            envoy = through_envoy(node, calls["GetAccount"][0], work, ns)
            node.stop()
            # the same workers keeping no answers: every call read, as the first call after a write is
            node = NodeProcess(data, "--read-answer-bytes", "0", read_workers=ns.read_workers).start(timeout=180)
            unkept = node_rows(node, calls, echo, work, ns)
            node.stop()
            pair = Echo(b"\x00" * response_size, calls["GetAccount"][0], work, processes=2)
            try:
                pair.qps(ns, 2)  # warmed up as the node's processes are
                ceiling = interleaved(functools.partial(pair.qps, ns), echo, ns)
            finally:
                pair.close()
        finally:
            node.stop()
            if echo is not None:
                echo.close()
    return Measured(alone, measured, workers, unkept), response_size, ceiling, envoy


PROTOCOL_OPTIONS = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"


def through_envoy(node: NodeProcess, request: bytes, work: Path, ns: argparse.Namespace) -> dict[str, EnvoyRun]:
    """GetAccount through Envoy in front of `node` (read workers serving), with the shipped cluster settings
    and with the old ones: calls/s and each read worker's CPU seconds over the run."""
    workers = sorted(workers_of(node))
    body = work / "envoy-GetAccount.bin"
    body.write_bytes(frame(request))
    out: dict[str, EnvoyRun] = {}
    for name in ("shipped", "one connection"):
        config = render([("127.0.0.1", node.ready["grpc_port"])], health_interval="30s")
        if name == "one connection":
            (cluster,) = [c for c in config["static_resources"]["clusters"] if c["name"] == "chain_node"]
            options = cluster["typed_extension_protocol_options"][PROTOCOL_OPTIONS]
            options.pop("common_http_protocol_options")  # connections were never retired
            options["explicit_http_config"]["http2_protocol_options"]["max_concurrent_streams"] = 1000
        envoy = EnvoyProcess(config, work / f"envoy-{len(out)}").start(healthy_hosts=1)
        try:
            url = f"{envoy.url}{SERVICE}/GetAccount"
            h2load(url, body, 1, ns.connections, ns.streams, ns.threads)  # warm-up
            before = [cpu_seconds(p) for p in workers]
            qps = h2load(url, body, ns.seconds, ns.connections, ns.streams, ns.threads)
            out[name] = EnvoyRun(qps, [cpu_seconds(p) - b for p, b in zip(workers, before, strict=True)])
        finally:
            envoy.stop()
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--streams", type=int, default=8, help="concurrent calls per connection (h2load -m)")
    parser.add_argument("--threads", type=int, default=1, help="h2load threads")
    parser.add_argument(
        "--read-workers", type=int, default=None, help="read workers of the measured node (default: the node's own)"
    )
    parser.add_argument("--slices", type=int, default=3, help="echo/node alternations per row (see interleaved)")
    ns = parser.parse_args()
    assert shutil.which("h2load"), "h2load is not installed (make bench installs the Debian package nghttp2-client)"
    m, size, (two, one), envoy = measure(ns)
    flags = "default flags" if ns.read_workers is None else f"--read-workers {ns.read_workers}"
    print(f"h2load -c {ns.connections} -m {ns.streams} -t {ns.threads}, {ns.seconds:g} s per row; baseline: a bare")
    print(f"grpc.aio echo (one process, {size}-byte response) measured alternately with each row, {ns.slices} slices\n")
    print("| call | read workers | calls/s | echo calls/s | ÷ echo |")
    print("|---|---:|---:|---:|---:|")
    for label, by_method in (
        ("0", m.alone),
        (f"{m.workers} ({flags})", m.rows),
        (f"{m.workers}, no answers kept", m.unkept),
    ):
        for method, (qps, echo) in by_method.items():
            print(f"| {method} | {label} | {qps:,.0f} | {echo:,.0f} | {qps / echo:.2f} |")
    print(
        f"\nceiling: two bare echo processes on one port (SO_REUSEPORT, uvloop, as the read workers) "
        f"{two:,.0f} calls/s ÷ the echo {one:,.0f} = {two / one:.2f}: what any two grpc.aio processes get "
        "on this machine, with no work behind a call"
    )
    print(f"\nGetAccount through Envoy (one worker thread), {flags} ({m.workers} read workers), same h2load load:")
    for name, run in envoy.items():
        cpu = " / ".join(f"{c:.2f}" for c in run.worker_cpu)
        print(f"- {name} cluster settings: {run.qps:,.0f} calls/s; read workers' CPU {cpu} s")
    load = f"h2load -c{ns.connections} -m{ns.streams} -t{ns.threads} -D{ns.seconds:g}"
    for method, key in TABLE_KEYS.items():
        qps, echo = m.rows[method]
        how = (
            f"{qps:,.0f} ÷ {echo:,.0f} calls/s, {flags} ({m.workers} read workers; {load}, echo and node "
            f"alternating in {ns.slices} slices); main process alone {ratio(m.alone[method]):.2f}; "
            f"ceiling (two bare echo processes ÷ echo) {two / one:.2f}; "
            f"no answers kept (--read-answer-bytes 0) {ratio(m.unkept[method]):.2f}"
        )
        emit(Row(key, qps / echo, how))


def ratio(pair: Pair) -> float:
    return pair[0] / pair[1]


if __name__ == "__main__":
    main()
