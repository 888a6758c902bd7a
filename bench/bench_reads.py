"""gRPC unary read throughput of the node next to a bare grpc.aio echo server, driven by `h2load`.

    python -m bench.bench_reads [--seconds S] [--connections C] [--streams M] [--read-workers N]

Baseline: a single-process grpc.aio server (no interceptors) whose one unary method answers a precomputed
response of the size of the node's GetAccount response, measured right before each row (the machine is
shared: a baseline taken minutes earlier says little). Then GetAccount, GetProject and GetOperationProof
(of the account's state key) against one node store, served first by the main process alone
(`--read-workers 0`), then by N read workers (`--read-workers N`, the main process restarted on the same
store). Every row is QPS ÷ the echo's QPS, all in one run. `h2load` (Debian `nghttp2-client`, installed by
`make bench`) sends each call as a framed gRPC request read from a file: the 5-byte prefix (not
compressed, big-endian length) and the serialised request; one checked call through a gRPC client before
each row proves the request is answered OK (h2load sees HTTP 200 whatever the grpc-status).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import multiprocessing
import re
import shutil
import struct
import subprocess
import tempfile
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import grpc

from bench.table import Row, emit
from chain.v1 import rpc_pb2, service_pb2_grpc
from node.storage import schema
from tests.fixtures.actors import new_account
from tests.fixtures.nodeproc import NodeProcess

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


def echo_main(response: bytes, conn: Connection) -> None:
    """The baseline server's process: reports its port, serves until its pipe closes."""

    async def serve() -> None:
        async def echo(_request: bytes, _context: Any) -> bytes:
            return response

        handler = grpc.method_handlers_generic_handler(
            "bench.Echo", {"Echo": grpc.unary_unary_rpc_method_handler(echo)}
        )
        server = grpc.aio.server(options=[("grpc.so_reuseport", 0)])
        server.add_generic_rpc_handlers((handler,))
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        conn.send(port)
        with contextlib.suppress(EOFError):  # EOF: the bench is done
            await asyncio.to_thread(conn.recv_bytes)
        await server.stop(None)

    asyncio.run(serve())


class Echo:
    """The baseline server in its own process, kept up for the whole run: measured right before each row."""

    def __init__(self, response: bytes, request: bytes, work: Path) -> None:
        ctx = multiprocessing.get_context("spawn")
        self._parent, child = ctx.Pipe()
        self._proc = ctx.Process(target=echo_main, args=(response, child), daemon=True)
        self._proc.start()
        self.port = int(self._parent.recv())
        with grpc.insecure_channel(f"127.0.0.1:{self.port}") as channel:
            assert channel.unary_unary(ECHO_METHOD, None, None)(request, timeout=10) == response
        self._body = work / "echo.bin"
        self._body.write_bytes(frame(request))

    def qps(self, ns: argparse.Namespace) -> float:
        url = f"http://127.0.0.1:{self.port}{ECHO_METHOD}"
        return h2load(url, self._body, ns.seconds, ns.connections, ns.streams, ns.threads)

    def close(self) -> None:
        self._parent.close()
        self._proc.join(10)
        if self._proc.is_alive():
            self._proc.kill()


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


Pair = tuple[float, float]  # (node calls/s, echo calls/s measured just before)


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
            baseline = echo.qps(ns)  # the machine is shared: each row against an echo taken just before it
            out[method] = (h2load(url, body, ns.seconds, ns.connections, ns.streams, ns.threads), baseline)
    return out


def measure(ns: argparse.Namespace) -> tuple[dict[int, dict[str, Pair]], int]:
    with tempfile.TemporaryDirectory() as d:
        work, data = Path(d), Path(d) / "node"
        node = NodeProcess(data, "--read-workers", "0").start()
        echo: Echo | None = None
        try:
            calls = populate(node)
            with grpc.insecure_channel(node.grpc_target) as channel:
                stub = service_pb2_grpc.ChainServiceStub(channel)
                response_size = len(calls["GetAccount"][1](stub).SerializeToString())
            echo = Echo(b"\x00" * response_size, calls["GetAccount"][0], work)
            rows = {0: node_rows(node, calls, echo, work, ns)}
            node.stop()
            node = NodeProcess(data, "--read-workers", str(ns.read_workers)).start(timeout=180)
            rows[ns.read_workers] = node_rows(node, calls, echo, work, ns)
        finally:
            node.stop()
            if echo is not None:
                echo.close()
    return rows, response_size


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--streams", type=int, default=8, help="concurrent calls per connection (h2load -m)")
    parser.add_argument("--threads", type=int, default=1, help="h2load threads")
    parser.add_argument("--read-workers", type=int, default=2)
    ns = parser.parse_args()
    assert shutil.which("h2load"), "h2load is not installed (make bench installs the Debian package nghttp2-client)"
    rows, size = measure(ns)
    print(f"h2load -c {ns.connections} -m {ns.streams} -t {ns.threads}, {ns.seconds:g} s per row; baseline: a bare")
    print(f"grpc.aio echo (one process, {size}-byte response) measured right before each row\n")
    print("| call | read workers | calls/s | echo calls/s | ÷ echo |")
    print("|---|---:|---:|---:|---:|")
    for workers, by_method in rows.items():
        for method, (qps, echo) in by_method.items():
            print(f"| {method} | {workers} | {qps:,.0f} | {echo:,.0f} | {qps / echo:.2f} |")
    load = f"h2load -c{ns.connections} -m{ns.streams} -t{ns.threads} -D{ns.seconds:g}"
    alone = rows[0]
    for method, key in TABLE_KEYS.items():
        qps, echo = rows[ns.read_workers][method]
        how = (
            f"{qps:,.0f} ÷ {echo:,.0f} calls/s with --read-workers {ns.read_workers} ({load}, echo measured just "
            f"before); main process alone {alone[method][0] / alone[method][1]:.2f}"
        )
        emit(Row(key, qps / echo, how))


if __name__ == "__main__":
    main()
