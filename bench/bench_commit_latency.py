"""Submit → committed latency under load, solo and replicated, at shares of the measured saturated rate.

    python -m bench.bench_commit_latency [--messages N] [--seconds S] [--clients C] [--batch B] [--no-replicated]

For each configuration, on the same machine in the same run:

- the saturated rate: C load-client processes (bench/clients.py) submit batches of 100 follows as fast as
  they are answered, two in flight each (as bench_node), counted until the last message's block reaches a
  SubscribeBlocks stream;
- then the same follows paced at 50% and 90% of that rate for S seconds each, in batches of B (small
  batches: a batch of 100 a second would make where it falls against the block interval the latency), each
  client one batch at a time. Each message's latency is from its batch's send to the arrival of the block
  holding it on a SubscribeBlocks stream of the node the client submitted to (a watcher process per node,
  one clock for every process): what a client waiting on its own node for the commit sees;
- the block interval beside it: the node's `--block-interval` and the interval between the blocks seen
  during the phase.

Solo is one node with its default flags (read workers sized from the machine; `--block-interval` is the
node's default, which the test fixture shortens). Replicated is three members on a three-member etcd
(with fsync), all on this machine, with a cluster secret, client i on member i mod 3; the members run with
`--verify-workers 0` and no read workers, as in bench_replicated (three nodes share the machine's cores).
The goal: p99 at 50% load ≤ 3 block intervals, solo and replicated (bench/table.py); the row's figure is
p99 ÷ the block interval.
"""

from __future__ import annotations

import argparse
import functools
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from bench.bench_node import BATCH, IN_FLIGHT, Watcher, percentile
from bench.bench_replicated import submit_retrying
from bench.clients import ClientProcesses, Load
from bench.table import Row, emit
from node.constants import UNIT_LINKS
from node.server.config import NodeConfig
from tests.fixtures.etcdproc import EtcdCluster
from tests.fixtures.nodeproc import NodeProcess
from tests.fixtures.replicaset import ReplicaSet, funded_actors

SHARES = (0.5, 0.9)  # of the saturated rate
GOAL_SHARE = 0.5
KEYS = {"solo": "commit_p99_solo", "replicated": "commit_p99_replicated"}  # the goals' rows (bench/table.py)


@dataclass(frozen=True)
class Phase:
    offered: float  # msgs/s the clients were paced to (0: unpaced)
    sent: int
    committed: int  # of the messages sent, those seen committed on the node their client submitted to
    rate: float  # committed msgs/s, from the clients' start to the last block seen
    p50_ms: float
    p99_ms: float
    block_ms: float  # mean interval between the blocks seen during the phase (nan: fewer than two)


def follows(node: NodeProcess, clients: int, total: int, batch: int) -> Load:
    """Per client, its batches of signed follows, from accounts funded with storage enough for them."""
    per = max(1, total // clients)
    with node.client() as c:
        actors = funded_actors(c, node.authority(), clients, units=-(-per // UNIT_LINKS))
    return [
        [[a.b.follow(os.urandom(20)) for _ in range(min(batch, per - i))] for i in range(0, per, batch)] for a in actors
    ]


def member_of(load: Load, members: int) -> dict[bytes, int]:
    """Which node each message goes to: client i's to node i mod `members` (ClientProcesses' spread)."""
    return {m.hash: i % members for i, batches in enumerate(load) for batch in batches for m in batch}


def summarise(
    sent: dict[bytes, float], arrivals: list[dict[bytes, float]], where: dict[bytes, int], start: float, offered: float
) -> Phase:
    """Latencies of the messages sent, each read on the node its client submitted to (`where`), and the rate
    and block interval as the first node saw them."""
    latencies = [arrivals[where[h]][h] - t for h, t in sent.items() if h in arrivals[where[h]]]
    seen = arrivals[0]
    blocks = sorted(set(seen.values()))  # a block's messages arrive together
    done = blocks[-1] if blocks else start
    return Phase(
        offered=offered,
        sent=len(sent),
        committed=len(latencies),
        rate=len(seen) / (done - start) if done > start else 0.0,
        p50_ms=percentile(latencies, 50) * 1000 if latencies else float("nan"),
        p99_ms=percentile(latencies, 99) * 1000 if latencies else float("nan"),
        block_ms=(blocks[-1] - blocks[0]) * 1000 / (len(blocks) - 1) if len(blocks) > 1 else float("nan"),
    )


def watched_phase(targets: list[str], load: Load, rate: float = 0.0, timeout: float = 180.0) -> Phase:
    """`load` sent by one process per client (client i to targets[i mod n]; paced to `rate` msgs/s in all,
    or unpaced with IN_FLIGHT batches each), every node watched on SubscribeBlocks by a process of its own."""
    total = sum(len(b) for batches in load for b in batches)
    watchers = [Watcher(t, total) for t in targets]
    submit = functools.partial(submit_retrying, in_flight=1 if rate else IN_FLIGHT)
    clients = ClientProcesses(submit, targets, load, rate)
    time.sleep(0.3)  # the watchers' streams are open before the first message
    submitted = clients.run()
    arrivals = [w.join(timeout) for w in watchers]
    return summarise(submitted.sent, arrivals, member_of(load, len(targets)), submitted.start, rate)


def configuration(targets: list[str], node: NodeProcess, ns: argparse.Namespace) -> dict[float, Phase]:
    """The saturated rate (share 1.0), then each of SHARES of it, paced."""
    saturated = watched_phase(targets, follows(node, ns.clients, ns.messages, BATCH))
    out = {1.0: saturated}
    for share in SHARES:
        rate = share * saturated.rate
        out[share] = watched_phase(targets, follows(node, ns.clients, int(rate * ns.seconds), ns.batch), rate)
    return out


def solo(work: Path, ns: argparse.Namespace) -> dict[float, Phase]:
    node = NodeProcess(work / "solo", "--block-interval", f"{ns.block_interval:g}", read_workers=None).start()
    try:
        return configuration([node.grpc_target], node, ns)
    finally:
        node.stop()


def replicated(work: Path, ns: argparse.Namespace) -> dict[float, Phase]:
    etcd = EtcdCluster(work / "etcd", 3, fsync=True).start()
    try:
        secret = work / "cluster-secret"
        secret.write_text(os.urandom(16).hex())
        nodes = ReplicaSet(
            work / "members", etcd, "--cluster-secret-file", str(secret), block_interval=ns.block_interval
        )
        nodes.start(3)
        try:
            return configuration([n.grpc_target for n in nodes.nodes], nodes.nodes[0], ns)
        finally:
            nodes.stop()
    finally:
        etcd.stop()


def report(name: str, phases: dict[float, Phase], interval_ms: float) -> None:
    for share, p in sorted(phases.items(), key=lambda kv: -kv[0] if kv[0] == 1.0 else kv[0]):  # saturated first
        load = "saturated" if share == 1.0 else f"{share:.0%} ({p.offered:,.0f} msgs/s)"
        print(
            f"| {name} | {load} | {p.committed:,} of {p.sent:,} | {p.rate:,.0f} | {p.p50_ms:,.0f} | {p.p99_ms:,.0f} "
            f"| {p.p99_ms / interval_ms:.2f} | {interval_ms:.0f} / {p.block_ms:.0f} |"
        )


def row_detail(phases: dict[float, Phase], interval_ms: float, ns: argparse.Namespace) -> str:
    at, high, top = phases[GOAL_SHARE], phases[0.9], phases[1.0]
    return (
        f"p99 {at.p99_ms:,.0f} ms (p50 {at.p50_ms:,.0f}) at 50% of the saturated {top.rate:,.0f} msgs/s, block "
        f"interval {interval_ms:.0f} ms (blocks seen every {at.block_ms:.0f} ms); at 90%: p99 {high.p99_ms:,.0f} ms "
        f"= {high.p99_ms / interval_ms:.2f} intervals; {ns.clients} client processes, batches of {ns.batch}, "
        f"{ns.seconds:g} s per share"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=20_000, help="messages of the saturated phase")
    parser.add_argument("--seconds", type=float, default=10.0, help="length of each paced phase")
    parser.add_argument("--clients", type=int, default=4, help="load-client processes (spread over the members)")
    parser.add_argument("--batch", type=int, default=10, help="messages per batch in the paced phases")
    parser.add_argument("--block-interval", type=float, default=NodeConfig().block_interval)
    parser.add_argument("--no-replicated", action="store_true", help="solo only (no etcd)")
    ns = parser.parse_args()
    interval_ms = ns.block_interval * 1000
    results: dict[str, dict[float, Phase]] = {}
    with tempfile.TemporaryDirectory() as d:
        results["solo"] = solo(Path(d), ns)
        if not ns.no_replicated:
            results["replicated"] = replicated(Path(d), ns)
    print(f"\nsubmit → committed, {ns.clients} load-client processes; block interval {interval_ms:.0f} ms\n")
    print("| configuration | load | committed | msgs/s | p50 ms | p99 ms | p99 ÷ interval | interval set / seen ms |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for name, phases in results.items():
        report(name, phases, interval_ms)
    for name, phases in results.items():
        emit(Row(KEYS[name], phases[GOAL_SHARE].p99_ms / interval_ms, row_detail(phases, interval_ms, ns)))


if __name__ == "__main__":
    main()
