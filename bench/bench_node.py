"""Node throughput and latency over real sockets, next to a bare grpc.aio echo server.

    python -m bench.bench_node [--messages N] [--clients C]

- committed messages per second through BatchSubmitMessages (batches of 100, C concurrent clients, each in a
  process of its own: bench/clients.py, each keeping `--in-flight` batches in flight, 2 by default),
  counted from submission start until the last message is committed; where the machine's cores went
  meanwhile (bench/occupancy.py); and the same phase with one batch in flight per client, beside it;
- submit -> committed latency p50/p99 (time from the batch's submission until the block holding the
  message arrives on a SubscribeBlocks stream, read by a process of its own);
- the same traffic observed on SubscribeMessages instead (one stream event per message): what a
  per-message subscriber adds to the node's CPU;
- the same traffic with a chain-gateway attached (its feeds follow the node; no SSE clients): what a
  gateway costs the node, and the gateway's own CPU per message;
- read QPS of GetAccount and GetProject;
- the same traffic shapes against a bare grpc.aio echo server (no work behind it) in the same run.
The workload mixes follows (to random accounts) and single-commit bundles. The node runs with its default
flags (no gRPC-web listener aside): read workers sized from the machine's CPUs, so every call enters through a
worker and the writes are relayed to the main process, as on a node started with no flags.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import multiprocessing
import os
import sys
import tempfile
import threading
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import grpc

from bench.bench_crypto import bare_ed25519_rate
from bench.clients import ClientProcesses, send_all
from bench.occupancy import Occupancy
from bench.procstat import tree_cpu_delta, tree_cpu_seconds
from bench.table import Row, emit
from chain.v1 import message_pb2 as pb
from chain.v1 import rpc_pb2, service_pb2_grpc
from node.server.readers.supervisor import WORKER_MODULE
from tests.fixtures.actors import RemoteActor, new_account
from tests.fixtures.gwproc import GatewayProcess
from tests.fixtures.nodeproc import NodeProcess
from tests.fixtures.procs import children_running
from tests.harness import commit_meta

BATCH = 100
# batches each load client keeps in flight in the saturated phases: with one, the node's cores idled between
# a batch's answer and the client's next batch; four gain nothing over two
IN_FLIGHT = 2


def workload(node: NodeProcess, clients: int, total: int) -> list[list[list[pb.Message]]]:
    """Per client, a list of signed batches."""
    c = node.client()
    authority = node.authority()
    per_client = total // clients
    out = []
    seed = int.from_bytes(os.urandom(4), "big")
    for ci in range(clients):
        actor: RemoteActor = new_account(c, authority, units=10)
        projects = [c.commit(actor.b.project_create(f"bench{ci}-{j}"))[0].message.hash for j in range(4)]
        msgs = []
        for i in range(per_client):
            if i % 2:
                msgs.append(actor.b.follow(os.urandom(20)))
            else:
                meta = commit_meta(seed + ci * 10_000_000 + i)
                msgs.append(actor.b.commit_bundle(projects[i % len(projects)], [meta]))
        out.append([msgs[i : i + BATCH] for i in range(0, len(msgs), BATCH)])
    c.close()
    return out


def settle(pid: int, quiet: float = 0.05, timeout: float = 20.0) -> None:
    """Wait until the process tree uses under `quiet` of a core over half a second (or `timeout` passes)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        before = tree_cpu_seconds(pid)
        time.sleep(0.5)
        if tree_cpu_delta(before, tree_cpu_seconds(pid)) < quiet * 0.5:
            return


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


async def submit_all(
    target: str, batches: list[list[pb.Message]], sent: dict[bytes, float], rate: float = 0.0, in_flight: int = 1
) -> int:
    """Submit batches on one channel: paced to `rate` (msgs/s for this client) one at a time, or unpaced
    `in_flight` at a time (bench/clients.py `send_all`)."""
    accepted = 0
    async with grpc.aio.insecure_channel(target) as channel:
        stub = service_pb2_grpc.ChainServiceStub(channel)

        async def send(batch: list[pb.Message]) -> None:
            nonlocal accepted
            resp = await stub.BatchSubmitMessages(rpc_pb2.BatchSubmitMessagesRequest(messages=batch))
            accepted += sum(r.accepted for r in resp.results)

        await send_all(batches, sent, rate, in_flight, send)
    return accepted


def watch(target: str, wanted: int, blocks: bool, conn: Connection) -> None:
    """The watcher process: arrival time (perf_counter, one clock for every process on Linux) of each
    committed message, from SubscribeBlocks with the blocks' messages (`blocks`) or SubscribeMessages, sent
    back once `wanted` arrived or when asked to stop."""
    arrived: dict[bytes, float] = {}
    channel = grpc.insecure_channel(target)
    stub = service_pb2_grpc.ChainServiceStub(channel)
    stream: Any = (
        stub.SubscribeBlocks(rpc_pb2.SubscribeBlocksRequest(include_chunks=True))
        if blocks
        else stub.SubscribeMessages(rpc_pb2.SubscribeMessagesRequest())
    )

    def stop_when_asked() -> None:
        if conn.recv() == "stop":
            stream.cancel()

    threading.Thread(target=stop_when_asked, daemon=True).start()
    conn.send("ready")
    try:
        for item in stream:
            now = time.perf_counter()
            if blocks:
                for chunk in item.block.chunks:
                    for m in chunk.messages:
                        arrived[m.hash] = now
            else:
                arrived[item.message.message.hash] = now
            if len(arrived) >= wanted:
                break
    except grpc.RpcError:
        pass  # cancelled: what arrived so far
    conn.send(arrived)
    channel.close()


class Watcher:
    """Commits seen from outside, by a process of its own: the observer shares no GIL with the clients
    (in a thread of the clients' process it fell behind the node by up to a second at 4,000 msgs/s).

    By default it follows SubscribeBlocks with the blocks' messages: one event per block. With
    `messages=True` it follows SubscribeMessages, one event per message, which costs the node a gRPC
    stream write per message and subscriber."""

    def __init__(self, target: str, wanted: int, *, messages: bool = False) -> None:
        ctx = multiprocessing.get_context("spawn")
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(target=watch, args=(target, wanted, not messages, child), daemon=True)
        self._proc.start()
        if self._conn.recv() != "ready":
            raise RuntimeError("the watcher did not start")

    def join(self, timeout: float) -> dict[bytes, float]:
        """Arrival times once every wanted message arrived, or what arrived within `timeout`."""
        if not self._conn.poll(timeout):
            self._conn.send("stop")
        arrived: dict[bytes, float] = self._conn.recv()
        self._proc.join(10)
        return arrived


def write_phase(
    node: NodeProcess,
    per_client: list[list[list[pb.Message]]],
    rate: float = 0.0,
    *,
    messages: bool = False,
    in_flight: int = IN_FLIGHT,
) -> dict[str, float]:
    """`messages`: observe commits on SubscribeMessages (one stream write per message) instead of blocks;
    `in_flight`: batches each client keeps in flight when unpaced (a paced client sends one at a time)."""
    total = sum(len(b) for batches in per_client for b in batches)
    watcher = Watcher(node.grpc_target, total, messages=messages)
    submit = functools.partial(submit_all, in_flight=1 if rate else in_flight)
    clients = ClientProcesses(submit, [node.grpc_target], per_client, rate)  # one process each
    time.sleep(0.3)
    load = clients.run()
    arrived = watcher.join(120)
    done = max(arrived.values()) if arrived else time.perf_counter()
    latencies = [arrived[h] - load.sent[h] for h in arrived if h in load.sent]
    return {
        "messages": total,
        "accepted": load.accepted,
        "committed": len(arrived),
        "submit_rate": load.accepted / (load.finished - load.start),
        "commit_rate": len(arrived) / (done - load.start),
        "p50_ms": percentile(latencies, 50) * 1000,
        "p99_ms": percentile(latencies, 99) * 1000,
    }


def measured_phase(
    node: NodeProcess,
    load: list[list[list[pb.Message]]],
    *,
    messages: bool = False,
    also: int = 0,
    in_flight: int = IN_FLIGHT,
) -> tuple[dict[str, float], float, float]:
    """`write_phase`, and the CPU seconds per committed message of the node's process tree (the node, its
    verify workers and store writer) and of process `also`'s tree (0.0 without one) over it."""
    assert node.proc is not None
    before, other = tree_cpu_seconds(node.proc.pid), tree_cpu_seconds(also) if also else {}
    w = write_phase(node, load, messages=messages, in_flight=in_flight)
    committed = max(1, w["committed"])
    node_cpu = tree_cpu_delta(before, tree_cpu_seconds(node.proc.pid)) / committed
    other_cpu = tree_cpu_delta(other, tree_cpu_seconds(also)) / committed if also else 0.0
    return w, node_cpu, other_cpu


async def unary_qps(target: str, method: str, request: Any, response_type: Any, seconds: float, conc: int) -> float:
    count = 0
    deadline = time.perf_counter() + seconds
    async with grpc.aio.insecure_channel(target) as channel:
        call = channel.unary_unary(
            method, request_serializer=lambda m: m.SerializeToString(), response_deserializer=response_type.FromString
        )

        async def worker() -> None:
            nonlocal count
            while time.perf_counter() < deadline:
                await call(request)
                count += 1

        await asyncio.gather(*(worker() for _ in range(conc)))
    return count / seconds


class Echo(service_pb2_grpc.ChainServiceServicer):
    """The bare baseline: answers without doing anything."""

    async def BatchSubmitMessages(self, request, context):  # type: ignore[no-untyped-def]
        return rpc_pb2.BatchSubmitMessagesResponse(
            results=[rpc_pb2.SubmitResult(index=i, accepted=True) for i in range(len(request.messages))]
        )

    async def GetAccount(self, request, context):  # type: ignore[no-untyped-def]
        return rpc_pb2.GetAccountResponse()


def run_echo_server(port_box: list[int], stop: threading.Event, servicer: Echo | None = None) -> None:
    """Serve `servicer` (the bare echo by default) on a loopback port, put in `port_box`, until `stop`."""

    async def main() -> None:
        server = grpc.aio.server()
        answering = servicer if servicer is not None else Echo()  # type: ignore[abstract]
        service_pb2_grpc.add_ChainServiceServicer_to_server(answering, server)
        port_box.append(server.add_insecure_port("127.0.0.1:0"))
        await server.start()
        while not stop.is_set():
            await asyncio.sleep(0.1)
        await server.stop(0)

    asyncio.run(main())


def echo_process_main(conn: Connection) -> None:
    """Entry of the baseline's own process (like the node, it does not share the clients' GIL)."""
    box: list[int] = []
    stop = threading.Event()
    t = threading.Thread(target=run_echo_server, args=(box, stop), daemon=True)
    t.start()
    while not box:
        time.sleep(0.01)
    conn.send(box[0])
    conn.recv()
    stop.set()
    t.join()


def echo_in_subprocess() -> tuple[multiprocessing.process.BaseProcess, Connection]:
    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=echo_process_main, args=(child,), daemon=True)
    proc.start()
    return proc, parent


def echo_batches(target: str, per_client: list[list[list[pb.Message]]], in_flight: int = IN_FLIGHT) -> float:
    """The same batches from the same kind of client processes against the bare echo: submitted msgs/s."""
    load = ClientProcesses(functools.partial(submit_all, in_flight=in_flight), [target], per_client).run()
    return load.accepted / (load.finished - load.start)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--node-args", default="", help="extra chain-node flags")
    parser.add_argument("--paced-rate", type=float, default=1000.0, help="msgs/s of the latency phase")
    parser.add_argument("--in-flight", type=int, default=IN_FLIGHT, help="batches in flight per client")
    ns = parser.parse_args()
    depth = ns.in_flight
    with tempfile.TemporaryDirectory() as d:
        # the node's default flags (read workers sized by the node; the block interval the fixture shortens)
        node = NodeProcess(
            Path(d) / "data", "--web-addr", "", "--block-interval", "0.2", *ns.node_args.split(), read_workers=None
        ).start()
        try:
            print("preparing and signing the workload...", file=sys.stderr, flush=True)
            per_client = workload(node, ns.clients, ns.messages)
            assert node.proc is not None
            readers = len(children_running(node.proc.pid, WORKER_MODULE))
            # the ingest rows' unit, one core's bare Ed25519 verifies/s, taken just before and just after the
            # phase they divide (the node idle meanwhile) and averaged: this host's speed moves within a minute,
            # and one figure taken after the phase alone can move the rows by a quarter
            verify_before = bare_ed25519_rate()
            with Occupancy(node.proc.pid) as occupancy:  # what the cores did meanwhile: what bounds the rows
                w, per_message, _ = measured_phase(node, per_client, in_flight=depth)
            verify_after = bare_ed25519_rate()
            cores = occupancy.window()
            # the same phase with one batch in flight per client (the load of the passes before the
            # thirty-second), printed beside the row: what the load generator's depth changes
            with Occupancy(node.proc.pid) as occupancy_one:
                w1, per_message_1, _ = measured_phase(node, workload(node, ns.clients, ns.messages), in_flight=1)
            cores_one = occupancy_one.window()
            # the same traffic with a chain-gateway attached (its feeds follow the node; no SSE clients), right
            # after a control phase of the same size without it (later phases run on a larger state, so the
            # control goes first: any drift counts against the gateway)
            wc, wc_cpu, _ = measured_phase(node, workload(node, ns.clients, ns.messages // 2), in_flight=depth)
            with_gateway = workload(node, ns.clients, ns.messages // 2)
            gateway = GatewayProcess(
                node.grpc_target, args=("--log-level", "warning", "--node-internal-addr", node.internal_target)
            ).start()
            try:
                assert gateway.proc is not None
                settle(gateway.proc.pid)  # its start-up (imports, first calls) is over before the phase
                wg, wg_cpu, gw_cpu = measured_phase(node, with_gateway, also=gateway.proc.pid, in_flight=depth)
            finally:
                gateway.stop()
            # the same traffic observed on SubscribeMessages: what one per-message subscriber adds to the node
            with_messages = workload(node, ns.clients, ns.messages // 2)
            wm, wm_cpu, _ = measured_phase(node, with_messages, messages=True, in_flight=depth)
            paced_load = workload(node, ns.clients, int(ns.paced_rate * 5))
            paced = write_phase(node, paced_load, rate=ns.paced_rate)
            c = node.client()
            some = per_client[0][0][0]
            account = rpc_pb2.GetAccountRequest(owner_address=some.data.owner_address)
            project = rpc_pb2.GetProjectRequest(project_id=some.data.commit_bundle.project_id)
            q_account = asyncio.run(
                unary_qps(
                    node.grpc_target, "/chain.v1.ChainService/GetAccount", account, rpc_pb2.GetAccountResponse, 3, 8
                )
            )
            q_project = asyncio.run(
                unary_qps(
                    node.grpc_target, "/chain.v1.ChainService/GetProject", project, rpc_pb2.GetProjectResponse, 3, 8
                )
            )
            c.close()
        finally:
            node.stop()
    verify_rate = (verify_before + verify_after) / 2
    # the bare baseline: the same batches from the same kind of client processes
    proc, conn = echo_in_subprocess()
    target = f"127.0.0.1:{conn.recv()}"
    echo_msgs = echo_batches(target, per_client, depth)
    echo_qps = asyncio.run(
        unary_qps(target, "/chain.v1.ChainService/GetAccount", account, rpc_pb2.GetAccountResponse, 3, 8)
    )
    conn.send("stop")
    proc.join(10)

    print(f"\n### Node, {w['messages']:,} messages, {ns.clients} clients, batches of {BATCH}, {depth} in flight each\n")
    print("| measure | node | bare grpc.aio echo | ratio |")
    print("|---|---:|---:|---:|")
    print(
        f"| submitted msgs/s (BatchSubmitMessages) | {w['submit_rate']:,.0f} | {echo_msgs:,.0f} | "
        f"{w['submit_rate'] / echo_msgs:.2f} |"
    )
    print(f"| committed msgs/s | {w['commit_rate']:,.0f} | {echo_msgs:,.0f} | {w['commit_rate'] / echo_msgs:.2f} |")
    print(f"| GetAccount QPS (8 concurrent) | {q_account:,.0f} | {echo_qps:,.0f} | {q_account / echo_qps:.2f} |")
    print(f"| GetProject QPS (8 concurrent) | {q_project:,.0f} | {echo_qps:,.0f} | {q_project / echo_qps:.2f} |")
    print(
        f"\nsaturated (clients as fast as they can): submit -> committed p50 {w['p50_ms']:.0f} ms, "
        f"p99 {w['p99_ms']:.0f} ms, mostly queueing behind the backlog "
        f"({w['committed']:,} of {w['accepted']:,} accepted messages observed committed)"
    )
    print(
        f"paced at {ns.paced_rate:,.0f} msgs/s for 5 s: submit -> committed p50 {paced['p50_ms']:.0f} ms, "
        f"p99 {paced['p99_ms']:.0f} ms ({paced['committed']:,} of {paced['accepted']:,} committed; "
        f"block interval 200 ms)"
    )
    print(
        f"\nbare Ed25519 verify (one core, `cryptography`): {verify_rate:,.0f}/s (before the phase "
        f"{verify_before:,.0f}, after {verify_after:,.0f}); committed msgs/s ÷ that: "
        f"{w['commit_rate'] / verify_rate:.2f}; node CPU (main process + verify workers) per committed message: "
        f"{per_message * 1e6:.0f} µs = {per_message * verify_rate:.2f} verifies"
    )
    print(
        f"observed on SubscribeMessages instead of SubscribeBlocks ({wm['messages']:,} messages): "
        f"{wm['commit_rate']:,.0f} msgs/s = {wm['commit_rate'] / verify_rate:.2f}, node CPU {wm_cpu * 1e6:.0f} µs "
        f"= {wm_cpu * verify_rate:.2f} verifies per message (one gRPC stream write per message and subscriber)"
    )
    print(
        f"with a chain-gateway attached (its message and block feeds, no SSE clients; {wg['messages']:,} messages): "
        f"{wg['commit_rate']:,.0f} msgs/s = {wg['commit_rate'] / verify_rate:.2f}, node CPU {wg_cpu * 1e6:.0f} µs "
        f"= {wg_cpu * verify_rate:.2f} verifies per message (the control phase just before, without it: "
        f"{wc['commit_rate']:,.0f} msgs/s, {wc_cpu * 1e6:.0f} µs); the gateway's own CPU {gw_cpu * 1e6:.0f} µs "
        "per message"
    )
    print(f"saturated phase: {cores.describe()}")
    print(
        f"the same phase with one batch in flight per client: {w1['commit_rate']:,.0f} msgs/s = "
        f"{w1['commit_rate'] / verify_rate:.2f}, node CPU {per_message_1 * 1e6:.0f} µs = "
        f"{per_message_1 * verify_rate:.2f} verifies per message; {cores_one.describe()}"
    )
    flags = ns.node_args or "the node's default flags"
    how = (
        f"{w['commit_rate']:,.0f} msgs/s ÷ {verify_rate:,.0f} verifies/s, {w['messages']:,} msgs; machine busy "
        f"{cores.machine_cores:.2f} of {cores.cores} cores, the node {cores.node_cores:.2f}; {flags} "
        f"({readers} read workers)"
    )
    emit(Row("ingest_ratio", w["commit_rate"] / verify_rate, how))
    emit(Row("cpu_per_message", per_message * verify_rate, f"{per_message * 1e6:.0f} µs of node CPU per message"))


if __name__ == "__main__":
    main()
