"""Replicated nodes on etcd next to `solo`, in the same run on the same machine.

    python -m bench.bench_replicated [--messages N] [--rounds R] [--trials T] [--profile DIR]

Solo, three members with a cluster secret and three without are measured in R interleaved rounds (the two
clusters' order alternates, fresh data each round) and the ratios are given per round, as a median and as a
min-max spread: one short run in a fixed order would measure the machine, not the configurations. Clients are
spread over the members, client i on member i mod 3, as behind Envoy's round robin.

- committed msgs/s: C clients submit batches of 100 follows as fast as they can, two in flight each as in
  bench_node (to the one solo node; spread over the three replicated nodes), counted until the last
  message's block reaches a SubscribeBlocks stream on the first member; the machine's busy cores while
  the load ran beside it (bench/occupancy.py: solo bound by its main process, the cluster by every core);
- node CPU per committed message: user + system CPU of every node's processes (its main process and its
  children: the store writer, any verify workers) from a moment every member holds the same block to the
  moment every member holds the phase's last one (a follower applies a block about half a second after the
  leader commits it: read any earlier, a phase would count its predecessor's last blocks and leave out its
  own), divided by the messages committed; etcd's three members' CPU is given beside it (it shares the
  machine). Each member's own is kept too. Then a second saturated phase of twice the messages sends every
  client to the leader: a follower's CPU per message ÷ the
  leader's there is what following alone costs (applying the leader's write sets, against admitting,
  executing and appending), without the admission of its own clients it does in the spread phase;
- the same cluster with every member `--verify-blocks full` (each follower executes every block again, as
  before write sets), measured in the same rounds: its follower CPU ratio and throughput beside the default's;
- etcd log bytes per message: after the phase, every log entry and part of the cluster (blocks and their
  write sets) over the messages their blocks hold, and the write sets' share of those bytes;
- leader admission CPU: one node given the cluster secret takes batches as a leader takes forwarded ones,
  alternately with the member proof (not verified again) and without (verified), node CPU per committed
  message of each, rounds interleaved so drifting load from other tenants falls on both alike;
- commit latency: the same follows paced below capacity in batches of 5, submit -> arrival on the stream,
  p50/p99;
- failover: kill -9 the leader, time until a surviving node holds a block cut after the kill, T trials,
  median and max (the killed node is restarted and caught up between trials).
- one machine per member, emulated (`--member-cores C`, 0.5 in `make bench`): after the rounds above, R'
  more (`--confined-rounds`, 2) in which every node, solo and each member alike, runs in a CPU quota of C cores
  of its own (a cgroup; bench/cpulimit.py), etcd and the clients outside them. Three members then have three
  times solo's CPU, as on three machines; the shared rounds measure them on the same two cores. Printed
  beside the row (the row is the shared figure); skipped, with the reason, where no cgroup can be made.
With `--profile DIR`, py-spy samples the members of round 1's clusters and not solo: that round's ratios
then measure the profiler too (one round of 30,000 messages: 0.48 with it, 0.59 without), and the report
says so.
Solo is the baseline: the replicated figures are given as ratios to it. etcd runs three members with
fsync; every node runs with --verify-workers 0 (three nodes share two cores). The replicated nodes share a
cluster secret (the leader does not verify forwarded batches again, docs/replication.md); the same cluster
without one (every forwarded batch verified again by the leader) is measured too, in the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import grpc

from bench.bench_node import BATCH, IN_FLIGHT, Watcher, percentile
from bench.clients import ClientProcesses, send_all
from bench.cpulimit import CpuLimits, unavailable
from bench.occupancy import Occupancy
from bench.procstat import cpu_seconds, tree_cpu_delta, tree_cpu_seconds
from bench.table import Row, emit
from chain.v1 import message_pb2 as pb
from chain.v1 import rpc_pb2, service_pb2_grpc
from node.constants import UNIT_LINKS
from node.server.ordering.etcd.client import EtcdClient, prefix_end
from node.server.ordering.etcd.log import BlockLog, Keys
from node.server.write.forwarding import RETRY_AFTER_MS
from node.server.write.membership import MemberProof
from tests.fixtures.etcdproc import EtcdCluster
from tests.fixtures.nodeproc import NodeProcess
from tests.fixtures.replicaset import ENV, ReplicaSet, funded_actors, leader_index, status, wait_height

COMMON = ("--web-addr", "", "--verify-workers", "0", "--block-interval", "0.2")
PACED_BATCH = 5  # messages per batch in the paced (latency) phase
Round = dict[str, dict[str, float]]  # "solo", "secret", "plain", "full" -> that phase's figures


def signed_load(node: NodeProcess, clients: int, total: int, batch: int = BATCH) -> list[list[list[pb.Message]]]:
    per = total // clients
    with node.client() as c:  # enough storage for every follow: past the quota they would be refused
        actors = funded_actors(c, node.authority(), clients, units=-(-per // UNIT_LINKS))
    return [
        [[a.b.follow(os.urandom(20)) for _ in range(min(batch, per - i))] for i in range(0, per, batch)] for a in actors
    ]


async def submit_retrying(
    target: str, batches: list[list[pb.Message]], sent: dict[bytes, float], rate: float, in_flight: int = 1
) -> int:
    """Batches on one channel (paced to `rate` msgs/s one at a time, or unpaced `in_flight` at a time:
    bench/clients.py `send_all`), like a real client: a batch refused with UNAVAILABLE (NOT_LEADER: the
    member lost its leader for a moment) is sent again after the retry hint; the messages it had accepted
    then answer DUPLICATE_MESSAGE. Returns how many messages the last answer to each batch accepted."""
    accepted = 0
    async with grpc.aio.insecure_channel(target) as channel:
        stub = service_pb2_grpc.ChainServiceStub(channel)

        async def send(batch: list[pb.Message]) -> None:
            nonlocal accepted
            while True:
                try:
                    resp = await stub.BatchSubmitMessages(rpc_pb2.BatchSubmitMessagesRequest(messages=batch))
                    accepted += sum(r.accepted for r in resp.results)
                    return
                except grpc.aio.AioRpcError as err:
                    if err.code() != grpc.StatusCode.UNAVAILABLE:
                        raise
                    await asyncio.sleep(RETRY_AFTER_MS / 1000)

        await send_all(batches, sent, rate, in_flight, send)
    return accepted


def phase(
    targets: list[str], watch_target: str, load: list[list[list[pb.Message]]], rate: float = 0.0
) -> dict[str, float]:
    total = sum(len(b) for batches in load for b in batches)
    watcher = Watcher(watch_target, total)
    submit = functools.partial(submit_retrying, in_flight=1 if rate else IN_FLIGHT)
    clients = ClientProcesses(submit, targets, load, rate)  # one process each, client i on member i mod 3
    time.sleep(0.3)
    submitted = clients.run()
    arrived = watcher.join(180)
    done = max(arrived.values()) if arrived else time.perf_counter()
    latencies = [arrived[h] - submitted.sent[h] for h in arrived if h in submitted.sent] or [float("nan")]
    return {
        "committed": len(arrived),
        "rate": len(arrived) / (done - submitted.start),
        "p50_ms": percentile(latencies, 50) * 1000,
        "p99_ms": percentile(latencies, 99) * 1000,
    }


def node_cpu(pids: list[int]) -> dict[int, float]:
    """CPU seconds so far of each node's process tree (its main process and its children: the store
    writer, any verify workers), by pid, for `tree_cpu_delta`."""
    return {p: s for pid in pids for p, s in tree_cpu_seconds(pid).items()}


def total_cpu(pids: list[int]) -> float:
    """CPU seconds so far of these processes alone (etcd's members)."""
    return sum(cpu_seconds(pid) for pid in pids)


def measure(
    targets: list[str],
    nodes: list[NodeProcess],
    messages: int,
    clients: int,
    paced: float,
    etcd: EtcdCluster | None = None,
    limits: CpuLimits | None = None,
) -> dict[str, float]:
    """Throughput, and node CPU per committed message: on a shared machine the CPU a message costs is the
    steadier figure (throughput is what the other tenants leave over, divided by it). With `etcd`, its
    members' CPU per committed message too (they share the machine with the nodes). With `limits`, each
    node runs in a CPU quota of its own from here on."""
    load = signed_load(nodes[0], clients, messages)
    pids = [n.proc.pid for n in nodes if n.proc is not None]
    if limits is not None:
        for pid in pids:
            limits.confine(pid)
    etcd_pids = [m.proc.pid for m in etcd.members if m.proc is not None] if etcd is not None else []
    settle(nodes)  # a member still applying an earlier phase's blocks would count them as this phase's
    before, etcd_before = [tree_cpu_seconds(p) for p in pids], total_cpu(etcd_pids)
    with Occupancy(*pids) as occupancy:  # the machine's cores while the load ran: what bounds the rate
        saturated = phase(targets, targets[0], load)
    window = occupancy.window()
    settle(nodes)  # and every member's CPU for this phase's blocks, the followers' last ones included
    committed = max(saturated["committed"], 1)
    each = [tree_cpu_delta(b, tree_cpu_seconds(p)) * 1000 / committed for b, p in zip(before, pids, strict=True)]
    out = {
        "rate": saturated["rate"],
        "machine_cores": window.machine_cores,
        "nodes_cores": window.node_cores,
        "main_thread": window.main_thread,
        "cpu_ms": sum(each),
        "etcd_ms": (total_cpu(etcd_pids) - etcd_before) * 1000 / committed,
    }
    out |= {f"cpu_ms_{i}": ms for i, ms in enumerate(each)}
    if paced:
        # small batches: a batch of 100 per client a second made where it fell against the block interval
        # decide the p50 (76-236 ms between runs of the same code)
        calm_load = signed_load(nodes[0], clients, int(paced * 5), batch=PACED_BATCH)
        calm = phase(targets, targets[0], calm_load, rate=paced)
        out |= {"p50_ms": calm["p50_ms"], "p99_ms": calm["p99_ms"]}
    return out


def settle(nodes: list[NodeProcess]) -> None:
    """Every node at the highest height any of them holds now: followers apply a block about half a second
    after the leader commits it, so a phase's CPU is read once they all hold its last block."""
    if len(nodes) > 1:
        wait_height(nodes, max(status(n).block_height for n in nodes))


def replicated(
    work: Path,
    etcd: EtcdCluster,
    extra: tuple[str, ...],
    ns: argparse.Namespace,
    paced: float,
    spy: Path | None,
    limits: CpuLimits | None = None,
) -> dict[str, float]:
    nodes = ReplicaSet(work, etcd, *COMMON, *extra, block_interval=0.2).start(3)
    spies: list[subprocess.Popen[bytes]] = []
    try:
        targets = [n.grpc_target for n in nodes.nodes]
        if spy is not None:
            spy.mkdir(parents=True, exist_ok=True)
            spies = profile([n.proc.pid for n in nodes.nodes if n.proc is not None], spy, 12)
        out = measure(targets, nodes.nodes, ns.messages, ns.clients, paced, etcd, limits)
        out["follower_ratio"] = follower_ratio(nodes, out)
        # every client on the leader: what following alone costs a member (no admission of its own clients)
        # twice the messages: a member's CPU is read in 10 ms clock ticks, a few per cent of a follower's share
        on_leader = measure([targets[leader_index(nodes)]], nodes.nodes, 2 * ns.messages, ns.clients, 0.0)
        out["following_ratio"] = follower_ratio(nodes, on_leader)
        prefix = extra[extra.index("--etcd-prefix") + 1]
        out["log_bytes"], out["write_set_share"] = asyncio.run(log_bytes(etcd, prefix))
        return out
    finally:
        for p in spies:
            p.wait()
        nodes.stop()


def follower_ratio(nodes: ReplicaSet, out: dict[str, float]) -> float:
    """The followers' mean CPU per committed message ÷ the leader's, from `measure`'s figures of each node."""
    leader = leader_index(nodes)
    followers = [out[f"cpu_ms_{i}"] for i in range(len(nodes.nodes)) if i != leader]
    return statistics.mean(followers) / out[f"cpu_ms_{leader}"]


async def log_bytes(etcd: EtcdCluster, prefix: str) -> tuple[float, float]:
    """Bytes of the cluster's log in etcd (entries and parts) per message its blocks hold, and the share of
    those bytes its write sets take."""
    client = EtcdClient(etcd.endpoints)
    try:
        keys = Keys(prefix.encode())
        log = BlockLog(client, keys)
        entries = await client.range(keys.log_prefix, prefix_end(keys.log_prefix))
        parts = await client.range(keys.part_floor(0), prefix_end(keys.prefix + b"part/"))
        total = sum(len(kv.value) for kv in [*entries, *parts])
        messages = written = 0
        for kv in entries:
            entry = await log.entry(int(kv.key.rsplit(b"/", 1)[1]), kv.value)
            messages += int(entry.block.header.message_count)
            written += len(entry.write_set or b"")
        return total / max(messages, 1), written / max(total, 1)
    finally:
        await client.close()


async def submit_proved(target: str, batches: list[list[pb.Message]], proof: MemberProof) -> None:
    async with grpc.aio.insecure_channel(target) as channel:
        stub = service_pb2_grpc.ChainServiceStub(channel)
        for batch in batches:
            request = rpc_pb2.BatchSubmitMessagesRequest(messages=batch)
            await stub.BatchSubmitMessages(request, metadata=proof.metadata(batch))


async def admission_round(node: NodeProcess, load: list[list[list[pb.Message]]], proof: MemberProof) -> float:
    """Node CPU (ms) per committed message while it admits and commits `load` sent with `proof`'s metadata."""
    total = sum(len(b) for batches in load for b in batches)
    watcher = Watcher(node.grpc_target, total)
    assert node.proc is not None
    before = node_cpu([node.proc.pid])
    await asyncio.gather(*(submit_proved(node.grpc_target, b, proof) for b in load))
    arrived = watcher.join(180)
    return tree_cpu_delta(before, node_cpu([node.proc.pid])) * 1000 / max(len(arrived), 1)


def leader_admission(work: Path, ns: argparse.Namespace, rounds: int) -> tuple[float, float]:
    """Median node CPU per message with the member proof and without, over interleaved rounds."""
    secret = os.urandom(16).hex().encode()
    (work / "leader-secret").write_bytes(secret)
    node = NodeProcess(work / "leader", *COMMON, "--cluster-secret-file", str(work / "leader-secret"), env=ENV)
    node.start()
    try:
        proved: list[float] = []
        plain: list[float] = []
        for _ in range(rounds):
            for proof, out in ((MemberProof(secret), proved), (MemberProof(), plain)):
                load = signed_load(node, ns.clients, ns.messages // 2)
                out.append(asyncio.run(admission_round(node, load, proof)))
        return statistics.median(proved), statistics.median(plain)
    finally:
        node.stop()


def failover_trials(nodes: ReplicaSet, trials: int) -> list[float]:
    times: list[float] = []
    for _ in range(trials):
        old = leader_index(nodes)
        survivors = [n for i, n in enumerate(nodes.nodes) if i != old]
        killed_ms = time.time() * 1000
        started = time.monotonic()
        nodes.kill(old)
        found = 0.0
        while not found and time.monotonic() - started < 30:
            for n in survivors:
                try:
                    s = status(n)
                    with n.client(timeout=2) as c:
                        head = c.stub.GetBlock(rpc_pb2.GetBlockRequest(block_number=s.block_height), timeout=2)
                except grpc.RpcError:
                    continue
                if head.block.header.timestamp_ms > killed_ms:  # cut by the new leader, after the kill
                    found = time.monotonic() - started
                    break
            time.sleep(0.01)
        times.append(found or float("inf"))
        nodes.restart(old)
        height = max(status(n).block_height for n in survivors)
        while status(nodes.nodes[old]).block_height < height:
            time.sleep(0.1)
    return times


def profile(pids: list[int], out: Path, seconds: float) -> list[subprocess.Popen[bytes]]:
    """py-spy over each node for `seconds` (raw folded stacks in `out`), when `--profile DIR` asks for it."""
    spy = Path(sys.executable).with_name("py-spy")
    return [
        subprocess.Popen(
            [
                str(spy),
                "record",
                "--nonblocking",
                "-r",
                "100",
                "-d",
                str(int(seconds)),
                "--format",
                "raw",
                "-o",
                str(out / f"{tag}.txt"),
                "-p",
                str(pid),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for tag, pid in zip(("n0", "n1", "n2"), pids, strict=False)
    ]


def round_of(
    work: Path, etcd: EtcdCluster, ns: argparse.Namespace, r: int, latency: bool, limits: CpuLimits | None = None
) -> Round:
    """One round: solo, three members with a cluster secret, three without, three with the secret executing
    every block (`--verify-blocks full`), one after another (with `limits`: each node in a CPU quota of its
    own)."""
    paced = ns.paced_rate if latency else 0.0
    tag = "confined-" if limits is not None else ""
    out: Round = {}
    solo = NodeProcess(work / f"{tag}solo{r}", *COMMON, env=ENV).start()
    try:
        out["solo"] = measure([solo.grpc_target], [solo], ns.messages, ns.clients, paced, limits=limits)
    finally:
        solo.stop()
    ttl = ("--lease-ttl", str(ns.lease_ttl))
    secret = work / "cluster-secret"
    secret.write_text(os.urandom(16).hex())
    proof = ("--cluster-secret-file", str(secret))
    configs = (("secret", proof), ("plain", ()), ("full", (*proof, "--verify-blocks", "full")))
    for name, extra in configs if r % 2 == 0 else configs[::-1]:  # alternate which one goes first
        print(f"  round {r + 1}: {tag}{name}...", file=sys.stderr, flush=True)
        spy = Path(ns.profile) / f"{name}{r}" if ns.profile and r == 0 and limits is None else None
        prefix = ("--etcd-prefix", f"/{tag}{name}{r}/")
        out[name] = replicated(work / f"{tag}{name}{r}", etcd, (*ttl, *prefix, *extra), ns, paced, spy, limits)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=9000)
    parser.add_argument("--clients", type=int, default=3, help="one per member at least (spread over them)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds of solo / secret / no secret")
    parser.add_argument("--paced-rate", type=float, default=300.0, help="msgs/s of the latency phase")
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--lease-ttl", type=int, default=2)
    parser.add_argument("--admission-rounds", type=int, default=3, help="0 skips the leader admission rounds")
    parser.add_argument("--profile", default="", help="a directory: py-spy each member in round 1")
    parser.add_argument("--member-cores", type=float, default=0.0, help="> 0: rounds with each node in a quota")
    parser.add_argument("--confined-rounds", type=int, default=2, help="rounds with --member-cores")
    ns = parser.parse_args()
    with tempfile.TemporaryDirectory() as d:
        work = Path(d)
        etcd = EtcdCluster(work / "etcd", 3, fsync=True).start()
        try:
            proved, plain = 0.0, 0.0  # 0: skipped (--admission-rounds 0)
            if ns.admission_rounds:
                print("leader admission, with and without the member proof...", file=sys.stderr, flush=True)
                proved, plain = leader_admission(work, ns, ns.admission_rounds)
            rounds = []
            for r in range(ns.rounds):
                print(f"round {r + 1} of {ns.rounds}: solo, 3 nodes with and without a secret", file=sys.stderr)
                rounds.append(round_of(work, etcd, ns, r, latency=r == 0))
            confined, skipped = confined_rounds(work, etcd, ns)
            times = failover(work, etcd, ns) if ns.trials else []
        finally:
            etcd.stop()
    report(rounds, ns, proved, plain, times, confined, skipped)


def confined_rounds(work: Path, etcd: EtcdCluster, ns: argparse.Namespace) -> tuple[list[Round], str]:
    """The rounds with each node in a CPU quota of its own (`--member-cores`), or why there are none."""
    if ns.member_cores <= 0 or ns.confined_rounds <= 0:
        return [], ""
    why = unavailable()
    if why:
        print(f"confined rounds skipped: {why}", file=sys.stderr)
        return [], why
    out = []
    with CpuLimits(ns.member_cores) as limits:
        for r in range(ns.confined_rounds):
            print(f"confined round {r + 1} of {ns.confined_rounds}: {ns.member_cores} cores a node", file=sys.stderr)
            out.append(round_of(work, etcd, ns, r, latency=False, limits=limits))
    return out, ""


def failover(work: Path, etcd: EtcdCluster, ns: argparse.Namespace) -> list[float]:
    print("failover trials...", file=sys.stderr, flush=True)
    ttl = ("--lease-ttl", str(ns.lease_ttl))
    quick = ReplicaSet(work / "failover", etcd, *COMMON, *ttl, "--empty-block-interval", "0.1").start(3)
    try:
        return failover_trials(quick, ns.trials)
    finally:
        quick.stop()


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def report(
    rounds: list[Round],
    ns: argparse.Namespace,
    proved: float,
    plain: float,
    times: list[float],
    confined: Sequence[Round] = (),
    skipped: str = "",
) -> None:
    first = rounds[0]
    s, r = first["solo"], first["secret"]
    ratio, plain_ratio = ratios(rounds, "secret"), ratios(rounds, "plain")
    print(
        f"\n### Replicated (3 nodes, 3 etcd members) next to solo, {ns.messages:,} messages, {ns.clients} clients "
        f"spread over the members, {len(rounds)} interleaved rounds (median, min-max)\n"
    )
    if ns.profile:
        print("(--profile: py-spy sampled round 1's clusters and not its solo node; round 1's ratios include it)\n")
    print_rounds(rounds)
    print(f"\ncommitted msgs/s ratio with the cluster secret: {spread(ratio)}; without: {spread(plain_ratio)}")
    cpu = [x["secret"]["cpu_ms"] / x["solo"]["cpu_ms"] for x in rounds]
    cpu_plain = [x["plain"]["cpu_ms"] / x["solo"]["cpu_ms"] for x in rounds]
    print(f"node CPU per committed message ÷ solo's, with the secret: {spread(cpu)}; without: {spread(cpu_plain)}")
    etcd_us = [x["secret"]["etcd_ms"] * 1000 for x in rounds]
    node_us = [x["secret"]["cpu_ms"] * 1000 for x in rounds]
    print(
        f"etcd CPU per committed message (3 members), with the secret: {statistics.median(etcd_us):.0f} µs "
        f"({min(etcd_us):.0f}-{max(etcd_us):.0f}), beside the nodes' {statistics.median(node_us):.0f} µs"
    )
    cores = os.cpu_count() or 1
    busy_solo, busy_members = bound_by(rounds)
    print(
        f"the machine while the load ran (median of the rounds): solo {busy_solo} of {cores} cores busy, its main "
        f"thread {statistics.median(x['solo']['main_thread'] for x in rounds):.2f} of one core; the three members "
        f"with the secret {busy_members} (the nodes "
        f"{statistics.median(x['secret']['nodes_cores'] for x in rounds):.2f}, etcd and the load clients the rest)"
    )
    spread_clients = [x["secret"]["follower_ratio"] for x in rounds]
    follower = [x["secret"]["following_ratio"] for x in rounds]
    follower_full = [x["full"]["following_ratio"] for x in rounds]
    by_full = [x["secret"]["rate"] / x["full"]["rate"] for x in rounds]
    log_b = [x["secret"]["log_bytes"] for x in rounds]
    share = statistics.median(x["secret"]["write_set_share"] for x in rounds)
    print(
        f"follower CPU per committed message ÷ the leader's, every client on the leader (following alone), "
        f"applying write sets: {spread(follower)}; executing every block (--verify-blocks full): "
        f"{spread(follower_full)}; clients spread over the members (each member admits its own): "
        f"{spread(spread_clients)}; committed msgs/s, write sets ÷ full: {spread(by_full)}"
    )
    print(f"etcd log bytes per message (blocks and write sets): {spread(log_b)}, write sets {share:.0%} of them")
    for key, label in (("p50_ms", "p50"), ("p99_ms", "p99")):
        print(
            f"commit latency {label}, paced {ns.paced_rate:.0f} msgs/s (round 1): solo {s[key]:.0f} ms, "
            f"3 nodes {r[key]:.0f} ms, ratio {r[key] / s[key]:.2f}"
        )
    if plain:
        print(
            f"\nleader admission, node CPU per committed message (median of {ns.admission_rounds} interleaved "
            f"rounds): verified {plain:.3f} ms, with the member proof {proved:.3f} ms, ratio {proved / plain:.2f}"
        )
    if times:
        print(
            f"\nfailover (kill -9 leader -> a block cut after the kill, lease TTL {ns.lease_ttl} s, "
            f"{len(times)} trials): median {statistics.median(times):.2f} s, max {max(times):.2f} s, "
            f"all: {', '.join(f'{t:.2f}' for t in times)}"
        )
    how = (
        f"median of {len(rounds)} interleaved rounds {spread(ratio)} (with the cluster secret; without "
        f"{spread(plain_ratio)}), {ns.messages:,} msgs; machine cores busy while the load ran: solo {busy_solo}, "
        f"3 members {busy_members} of {cores}"
    )
    if confined:
        own = f"{spread(ratios(confined, 'secret'))}, without the secret {spread(ratios(confined, 'plain'))}"
        print(
            f"\n### Each node in a CPU quota of {ns.member_cores} cores of its own (one machine per member, "
            f"emulated), {len(confined)} rounds\n"
        )
        print_rounds(confined)
        print(f"\ncommitted msgs/s ratio, each node in its own quota, with the cluster secret: {own}")
        how += f"; each node in its own {ns.member_cores}-core quota: {own}"
    elif skipped:
        print(f"\n(the rounds with each node in a CPU quota of its own were skipped: {skipped})")
    emit(Row("replicated_ratio", statistics.median(ratio), how))
    emit(
        Row(
            "follower_cpu_ratio",
            statistics.median(follower),
            f"clients on the leader, median of {len(rounds)} rounds {spread(follower)}; executing every block "
            f"(--verify-blocks full) {spread(follower_full)}; clients spread over the members {spread(spread_clients)}",
        )
    )
    emit(Row("log_bytes_per_message", statistics.median(log_b), f"{spread(log_b)} B; write sets {share:.0%}"))


def bound_by(rounds: Sequence[Round]) -> tuple[str, str]:
    """The machine's busy cores while the load ran, solo's and the three members' (with the secret), each as
    `spread` gives them: solo near one core more than its clients use is bound by its main process; the cluster
    at every core is bound by the CPU a message costs all of it."""
    return spread([x["solo"]["machine_cores"] for x in rounds]), spread([x["secret"]["machine_cores"] for x in rounds])


def ratios(rounds: Sequence[Round], cluster: str) -> list[float]:
    """Each round's committed msgs/s of `cluster` ("secret" or "plain") ÷ its solo's."""
    return [x[cluster]["rate"] / x["solo"]["rate"] for x in rounds]


def print_rounds(rounds: Sequence[Round]) -> None:
    print(
        "| round | solo msgs/s | 3 nodes, secret | ratio | 3 nodes, no secret | ratio | 3 nodes, full | ratio "
        "| CPU ms/msg solo / secret / none / full | follower ÷ leader CPU, clients on the leader, secret / full "
        "| etcd µs/msg secret / none | machine cores busy solo / secret |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for i, x in enumerate(rounds):
        a, b, c, f = x["solo"], x["secret"], x["plain"], x["full"]
        print(
            f"| {i + 1} | {a['rate']:,.0f} | {b['rate']:,.0f} | {b['rate'] / a['rate']:.2f} | {c['rate']:,.0f} | "
            f"{c['rate'] / a['rate']:.2f} | {f['rate']:,.0f} | {f['rate'] / a['rate']:.2f} | "
            f"{a['cpu_ms']:.2f} / {b['cpu_ms']:.2f} / {c['cpu_ms']:.2f} / {f['cpu_ms']:.2f} | "
            f"{b['following_ratio']:.2f} / {f['following_ratio']:.2f} | "
            f"{b['etcd_ms'] * 1000:.0f} / {c['etcd_ms'] * 1000:.0f} | "
            f"{a['machine_cores']:.2f} / {b['machine_cores']:.2f} |"
        )


if __name__ == "__main__":
    main()
