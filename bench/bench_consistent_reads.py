"""What a consistent read costs on a follower: GetAccount reads/s at each consistency ÷ the default's.

    python -m bench.bench_consistent_reads [--seconds S] [--rounds R] [--connections C] [--streams M]

Three members on a three-member etcd (fsync), on the same machine as the load (`h2load`, the metadata sent
as headers: one gRPC call per request, checked once through a gRPC client before each phase). The reads go
to a follower (not the leader) for S seconds per kind, the kinds in R interleaved rounds (their order
rotates each round, so drifting load from other tenants falls on all alike):

- default: the member's applied state (`serializable`), answered at once;
- min-height: `chain-min-height` of a block the member has applied (the session read of a client whose
  write is already there: the height checked in the read's own transaction, no wait);
- linearizable: `chain-read-consistency: linearizable` (one linearizable etcd range read of the log's
  `next` per call, then the member's own state, which is at that height already on an idle chain).

Printed: each kind's reads/s (median over the rounds) and its ratio to default in the same round (median,
min-max). The node's test processes run without read workers (as the tests' nodes do), so every read is the
main process's.
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import tempfile
from pathlib import Path

import grpc

from bench.bench_reads import frame
from chain.v1 import rpc_pb2, service_pb2_grpc
from tests.fixtures.etcdproc import EtcdCluster
from tests.fixtures.nodeproc import NodeProcess
from tests.fixtures.replicaset import ReplicaSet, funded_actors, leader_index, status

KINDS = ("default", "min-height", "linearizable")
Metadata = tuple[tuple[str, str], ...]


def metadata(kind: str, height: int) -> Metadata:
    if kind == "min-height":
        return (("chain-min-height", str(height)),)
    if kind == "linearizable":
        return (("chain-read-consistency", "linearizable"),)
    return ()


def h2load(url: str, body: Path, md: Metadata, seconds: float, connections: int, streams: int) -> float:
    """Requests/s of one h2load run with `md` as headers (every request answered: failures fail the bench)."""
    headers = [arg for key, value in md for arg in ("-H", f"{key}: {value}")]
    out = subprocess.run(
        ["h2load", "-d", str(body), "-H", "content-type: application/grpc", "-H", "te: trailers", *headers,
         "-c", str(connections), "-m", str(streams), "-t", "1", "-D", f"{seconds:g}", "--warm-up-time", "1", url],
        check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    done = re.search(r"finished in [\d.]+\w+, ([\d.]+) req/s", out)
    failed = re.search(r"requests: .* (\d+) failed, (\d+) errored", out)
    assert done is not None and failed is not None and failed.groups() == ("0", "0"), out
    return float(done.group(1))


def checked(target: str, request: rpc_pb2.GetAccountRequest, md: Metadata) -> None:
    """One call through a gRPC client: h2load counts HTTP 200s, whatever the gRPC status."""
    with grpc.insecure_channel(target) as channel:
        service_pb2_grpc.ChainServiceStub(channel).GetAccount(request, metadata=md, timeout=10)


def measure(
    follower: NodeProcess, request: rpc_pb2.GetAccountRequest, args: argparse.Namespace, body: Path
) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {k: [] for k in KINDS}
    height = status(follower).block_height
    url = f"http://{follower.grpc_target}/chain.v1.ChainService/GetAccount"
    for r in range(args.rounds):
        order = KINDS[r % len(KINDS) :] + KINDS[: r % len(KINDS)]
        for kind in order:
            md = metadata(kind, height)
            checked(follower.grpc_target, request, md)
            rate = h2load(url, body, md, args.seconds, args.connections, args.streams)
            out[kind].append(rate)
            print(f"round {r + 1} {kind}: {rate:,.0f} reads/s", flush=True)
    return out


def report(out: dict[str, list[float]], args: argparse.Namespace) -> None:
    how = f"GetAccount, h2load -c{args.connections} -m{args.streams}, {args.rounds} rounds of {args.seconds:g} s"
    print(f"\n### Consistent reads on a follower ({how})\n")
    print("| read | reads/s (median) | ÷ default (median, min-max) |")
    print("|---|---:|---|")
    for kind in KINDS:
        ratios = [run / base for run, base in zip(out[kind], out["default"], strict=True)]
        spread = f"{statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f})"
        print(f"| {kind} | {statistics.median(out[kind]):,.0f} | {spread} |")
    print("\nh2load, etcd and the three members share the machine; the ratios are of the same rounds.", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.bench_consistent_reads")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--connections", type=int, default=8, help="h2load -c")
    parser.add_argument("--streams", type=int, default=8, help="concurrent calls per connection (h2load -m)")
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
            body = work / "request.bin"
            body.write_bytes(frame(request.SerializeToString()))
            report(measure(follower, request, args, body), args)
        finally:
            nodes.stop()
            etcd.stop()


if __name__ == "__main__":
    main()
