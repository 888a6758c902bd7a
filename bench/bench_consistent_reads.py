"""What a consistent read costs on a follower: reads/s of GetAccount at each consistency ÷ the default's.

    python -m bench.bench_consistent_reads [--seconds S] [--rounds R] [--concurrency C]

Three members on a three-member etcd (fsync), on the same machine as the client. The reads go to a
follower (not the leader), C at once on one channel, for S seconds per kind, the kinds in R interleaved rounds
(their order rotates each round, so drifting load from other tenants falls on all alike):

- default: the member's applied state (`serializable`), answered at once;
- min-height: `chain-min-height` of a block the member has applied (the session read of a client whose
  write is already there: the check of the height, no wait);
- linearizable: `chain-read-consistency: linearizable` (one linearizable etcd range read of the log's
  `next` per call, then the member's own state, which is at that height already on an idle chain).

Printed: each kind's reads/s and p50/p99 latency (medians over the rounds) and its ratio to default in the
same round (median, min-max). Node CPU is not separated from the client's and etcd's: all share the machine.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

import grpc

from bench.bench_node import percentile
from chain.v1 import rpc_pb2, service_pb2_grpc
from tests.fixtures.etcdproc import EtcdCluster
from tests.fixtures.nodeproc import NodeProcess
from tests.fixtures.replicaset import ReplicaSet, funded_actors, leader_index, status

KINDS = ("default", "min-height", "linearizable")


def metadata(kind: str, height: int) -> tuple[tuple[str, str], ...]:
    if kind == "min-height":
        return (("chain-min-height", str(height)),)
    if kind == "linearizable":
        return (("chain-read-consistency", "linearizable"),)
    return ()


async def phase(
    target: str, request: rpc_pb2.GetAccountRequest, md: tuple[tuple[str, str], ...], seconds: float, concurrency: int
) -> tuple[float, list[float]]:
    """Reads/s and each read's latency (ms) of `concurrency` loops for `seconds`."""
    latencies: list[float] = []
    async with grpc.aio.insecure_channel(target) as channel:
        stub = service_pb2_grpc.ChainServiceStub(channel)
        await stub.GetAccount(request, metadata=md, timeout=10)  # the channel is up
        end = time.perf_counter() + seconds

        async def loop() -> None:
            while (now := time.perf_counter()) < end:
                await stub.GetAccount(request, metadata=md, timeout=10)
                latencies.append((time.perf_counter() - now) * 1000)

        started = time.perf_counter()
        await asyncio.gather(*(loop() for _ in range(concurrency)))
        elapsed = time.perf_counter() - started
    return len(latencies) / elapsed, latencies


def measure(
    follower: NodeProcess, request: rpc_pb2.GetAccountRequest, args: argparse.Namespace
) -> dict[str, list[dict[str, float]]]:
    out: dict[str, list[dict[str, float]]] = {k: [] for k in KINDS}
    height = status(follower).block_height
    for r in range(args.rounds):
        order = KINDS[r % len(KINDS) :] + KINDS[: r % len(KINDS)]
        for kind in order:
            rate, lat = asyncio.run(
                phase(follower.grpc_target, request, metadata(kind, height), args.seconds, args.concurrency)
            )
            out[kind].append({"rate": rate, "p50": percentile(lat, 50), "p99": percentile(lat, 99)})
            print(f"round {r + 1} {kind}: {rate:,.0f} reads/s", flush=True)
    return out


def report(out: dict[str, list[dict[str, float]]], args: argparse.Namespace) -> None:
    how = f"GetAccount, {args.concurrency} at once, {args.rounds} rounds of {args.seconds:g} s"
    print(f"\n### Consistent reads on a follower ({how})\n")
    print("| read | reads/s | ÷ default (median, min-max) | p50 ms | p99 ms |")
    print("|---|---:|---|---:|---:|")
    for kind in KINDS:
        runs = out[kind]
        ratios = [run["rate"] / base["rate"] for run, base in zip(runs, out["default"], strict=True)]
        spread = f"{statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f})"
        rate = statistics.median(r["rate"] for r in runs)
        p50 = statistics.median(r["p50"] for r in runs)
        p99 = statistics.median(r["p99"] for r in runs)
        print(f"| {kind} | {rate:,.0f} | {spread} | {p50:.2f} | {p99:.2f} |")
    print("\nThe client, etcd and the three members share the machine; the ratios are of the same rounds.", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.bench_consistent_reads")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-consistent-") as tmp:
        work = Path(tmp)
        etcd = EtcdCluster(work / "etcd", 3).start()
        nodes = ReplicaSet(work, etcd).start(3)
        try:
            leader = leader_index(nodes)
            with nodes.nodes[leader].client(timeout=30) as c:
                actor = funded_actors(c, nodes.authority(), 1)[0]
                c.commit(actor.b.follow(b"\x01" * 20))
            follower = nodes.nodes[(leader + 1) % 3]
            request = rpc_pb2.GetAccountRequest(owner_address=actor.address)
            report(measure(follower, request, args), args)
        finally:
            nodes.stop()
            etcd.stop()


if __name__ == "__main__":
    main()
