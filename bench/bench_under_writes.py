"""Reads while the chain is being written: what the read workers' kept answers and the gateway's REST body
memo give when blocks keep coming. The table's read rows run on an idle chain, where every repeated call
is answered from memory; this bench prints the figures of a chain that is not idle.

    python -m bench.bench_under_writes [--seconds S] [--rate R] [--rounds N] [--accounts A]

One store, one node with `--read-workers 2` at the node's default block interval (0.2 s), and a
chain-gateway in front of it. Three reads, each for S seconds:

- one account's GetAccount over gRPC by `h2load` (as `bench_reads`), over and over;
- the same account as `GET /v1/accounts/{addr}` through the gateway by `wrk` (as `bench_rest`);
- the same GET over A accounts in turn (a wrk script), so that a key is read a few times per block
  interval, not thousands: the case where a block leaves the workers' kept answers mostly stale.

Each idle, then **under writes**: a load client process (bench/clients.py) submits pre-signed follows
from another account, paced at R msgs/s, during the read (the follows/s column is what the node accepted of it:
reads that saturate the machine slow it). The accounts read never change, but every block is a write to
the store.

Both with the memos on (the defaults: 8 MiB of kept answers per read worker, 8 MiB of REST bodies) and off
(`--read-answer-bytes 0`, `--rest-memo-bytes 0`; the node and gateway restarted on the same store), the
two alternated for N rounds, the order swapped every round. The hit shares come from the processes' own
metrics (`chain_read_worker_answers_total`, `chain_rest_memo_lookups_total`): a read worker's answers are
kept per snapshot of the store, so a block makes them all stale, where the gateway's bodies are kept by
the node's answer bytes, which do not change when other accounts are written. The gateway asks the node
on every GET, so the workers' share is shown for the REST reads too.

Printed, not a row of the goals table (docs/performance.md, "Reads").
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench.bench_node import submit_all
from bench.bench_reads import frame, h2load
from bench.bench_rest import rotation_script, wrk
from bench.clients import ClientProcesses, Submitted
from chain.v1 import message_pb2 as pb
from chain.v1 import rpc_pb2
from node.constants import UNIT_LINKS
from tests.fixtures.gwproc import GatewayProcess
from tests.fixtures.nodeproc import NodeProcess
from tests.fixtures.replicaset import funded_actors
from tests.fixtures.scrape import read_worker_answers, scrape, value

SERVICE = "/chain.v1.ChainService"
BATCH = 20  # follows per submitted batch: a batch every 40 ms at 500 msgs/s
# (node flags, gateway flags) of each mode: "on" is the defaults, whatever they are
MODES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "on": ((), ()),
    "off": (("--read-answer-bytes", "0"), ("--rest-memo-bytes", "0")),
}


@dataclass
class Phase:
    """One interface's reads in one mode and load, over the rounds."""

    rates: list[float] = field(default_factory=list)  # reads/s per round
    counts: dict[str, list[float]] = field(default_factory=dict)  # per memo: [hits, lookups] in its runs
    written: list[float] = field(default_factory=list)  # follows accepted per second while reading

    def share(self, memo: str) -> str:
        hits, lookups = self.counts.get(memo, [0.0, 0.0])
        return f"{hits / lookups:.1%}" if lookups else "-"

    def wrote(self) -> str:
        return f"{statistics.median(self.written):,.0f}" if self.written else "-"


Phases = dict[tuple[str, str, str], Phase]  # (interface, mode, load)


def follows(node: NodeProcess, total: int) -> list[list[pb.Message]]:
    """`total` follows signed by a fresh account with the storage they need, in batches."""
    client = node.client()
    (actor,) = funded_actors(client, node.authority(), 1, units=-(-total // UNIT_LINKS) + 1)
    client.close()
    msgs = [actor.b.follow(os.urandom(20)) for _ in range(total)]
    return [msgs[i : i + BATCH] for i in range(0, len(msgs), BATCH)]


class Writes:
    """A load client process sending `follows` paced at `rate`, started with `start` and waited for with
    `join` (the reads run in between)."""

    def __init__(self, node: NodeProcess, rate: float, seconds: float) -> None:
        self._clients = ClientProcesses(submit_all, [node.grpc_target], [follows(node, int(rate * seconds))], rate)
        self._done: list[Submitted] = []
        self._thread = threading.Thread(target=lambda: self._done.append(self._clients.run()), daemon=True)

    def start(self) -> None:
        self._thread.start()

    def join(self) -> float:
        """Follows accepted per second of the run."""
        self._thread.join()
        (done,) = self._done
        return done.accepted / max(1e-9, done.finished - done.start)


def memo_counts(node: NodeProcess, gateway: GatewayProcess) -> dict[str, tuple[float, float]]:
    """(hits, lookups) so far: the read workers' kept answers ("workers"), the gateway's bodies ("gateway")."""
    hits, misses, _ = read_worker_answers(node.ready["metrics_port"])
    samples = scrape(gateway.ready["metrics_port"])
    name = "chain_rest_memo_lookups_total"
    rest_hits = value(samples, name, chain_memo_result="hit")
    rest_lookups = rest_hits + value(samples, name, chain_memo_result="miss")
    return {"workers": (hits, hits + misses), "gateway": (rest_hits, rest_lookups)}


@dataclass(frozen=True)
class Served:
    """The node and gateway of one mode, and what is read from them."""

    node: NodeProcess
    gateway: GatewayProcess
    address: bytes  # the account read over and over
    body: Path  # its framed GetAccount request, for h2load
    rotation: Path  # a wrk script reading every account of the wide read in turn

    def read(self, interface: str, seconds: float, ns: argparse.Namespace) -> float:
        """Reads per second over `seconds`."""
        if interface == "grpc":
            url = f"http://{self.node.grpc_target}{SERVICE}/GetAccount"
            return h2load(url, self.body, seconds, ns.connections, ns.streams, 1)
        if interface == "rest":
            return wrk(f"{self.gateway.url}/v1/accounts/0x{self.address.hex()}", seconds, ns.connections)[0]
        return wrk(self.gateway.url, seconds, ns.connections, script=str(self.rotation))[0]


INTERFACES = {
    "grpc": "gRPC GetAccount, one account (h2load; 2 read workers)",
    "rest": "REST GET /v1/accounts, one account (wrk; gateway)",
    "wide": "REST GET /v1/accounts, {accounts} accounts in turn",
}


def read_phase(served: Served, mode: str, ns: argparse.Namespace, into: Phases) -> None:
    """Every interface idle, then every one under writes, in one mode."""
    for interface in INTERFACES:
        served.read(interface, 1, ns)  # warm-up: every process, the first answers
    for load in ("idle", "writes"):
        for interface in INTERFACES:
            writes = Writes(served.node, ns.rate, ns.seconds) if load == "writes" else None
            before = memo_counts(served.node, served.gateway)
            if writes is not None:
                writes.start()
            phase = into.setdefault((interface, mode, load), Phase())
            phase.rates.append(served.read(interface, ns.seconds, ns))
            if writes is not None:
                phase.written.append(writes.join())
            time.sleep(1.2)  # the workers ship their counts about once a second
            for memo, (hits, lookups) in memo_counts(served.node, served.gateway).items():
                total = phase.counts.setdefault(memo, [0.0, 0.0])
                total[0] += hits - before[memo][0]
                total[1] += lookups - before[memo][1]


def measure(ns: argparse.Namespace) -> Phases:
    phases: Phases = {}
    with tempfile.TemporaryDirectory() as d:
        data = Path(d) / "node"
        node = NodeProcess(data).start()
        try:
            readers = funded_actors(node.client(), node.authority(), ns.accounts)
        finally:
            node.stop()
        reader = readers[0]
        body = Path(d) / "GetAccount.bin"
        body.write_bytes(frame(rpc_pb2.GetAccountRequest(owner_address=reader.address).SerializeToString()))
        paths = [f"/v1/accounts/0x{a.address.hex()}" for a in readers]
        rotation = rotation_script(paths, Path(d) / "rotate.lua")
        for r in range(ns.rounds):
            for mode in ("on", "off") if r % 2 == 0 else ("off", "on"):
                node_flags, gateway_flags = MODES[mode]
                node = NodeProcess(data, "--read-workers", "2", *node_flags, "--block-interval", "0.2").start(
                    timeout=180
                )
                gateway = None
                try:
                    gateway = GatewayProcess(
                        node.grpc_target, args=["--node-internal-addr", node.internal_target, *gateway_flags]
                    ).start()
                    read_phase(Served(node, gateway, reader.address, body, rotation), mode, ns, phases)
                finally:
                    if gateway is not None:
                        gateway.stop()
                    node.stop()
    return phases


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=5.0, help="each read run")
    parser.add_argument("--rate", type=float, default=500.0, help="follows per second while reading under writes")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--accounts", type=int, default=1000, help="accounts the wide REST read goes through")
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--streams", type=int, default=8, help="concurrent calls per connection (h2load -m)")
    ns = parser.parse_args()
    assert shutil.which("h2load") and shutil.which("wrk"), "make bench installs nghttp2-client and wrk"
    phases = measure(ns)
    print(
        f"### Reads idle and under {ns.rate:,.0f} follows/s from another account (blocks every 0.2 s), memos on "
        f"and off, median of {ns.rounds} rounds of {ns.seconds:g} s\n"
    )
    print(
        "| reads | memos | idle reads/s | under writes reads/s | writes ÷ idle | follows/s accepted "
        "| workers' hit share idle / writes | gateway's hit share idle / writes |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for interface, name in INTERFACES.items():
        for mode in MODES:
            idle, busy = phases[(interface, mode, "idle")], phases[(interface, mode, "writes")]
            idle_rate, busy_rate = statistics.median(idle.rates), statistics.median(busy.rates)
            print(
                f"| {name.format(accounts=ns.accounts)} | {mode} | {idle_rate:,.0f} | {busy_rate:,.0f} "
                f"| {busy_rate / idle_rate:.2f} | {busy.wrote()} | {idle.share('workers')} / {busy.share('workers')} "
                f"| {idle.share('gateway')} / {busy.share('gateway')} |"
            )


if __name__ == "__main__":
    main()
