"""How a node's cost per message moves as its store grows: successive ingest phases on one node.

    python -m bench.bench_growth [--phases 5] [--messages 20000] [--clients 4] [--volume disk|cloud]
    make bench-growth               # 5,000,000 messages in 25 phases, on the disk and on a cloud volume

The goals table of `make bench` measures ingest on a fresh store (`bench_node`). A node that has run for a while has a
larger store, and every message inserts keys at random places of it: its hash record, its links, its
account's activity; its state-tree nodes are appended with their block, and the nodes it replaced are
collected once the retained trees no longer reach them (`--state-history`).
This bench runs `--phases` saturated phases of `--messages` pre-signed messages each, one after another on
the same node (the clients of `bench_node`, one process each; the node settles between phases), and prints
one line per phase:

- committed msgs/s, and that ÷ a one-core bare Ed25519 verify/s taken just before and after the phase;
- node CPU per committed message, split by process (the main process, the store writer, the verify
  workers), from /proc;
- what the store writer wrote per committed message: the bytes it handed to the kernel (`wchar`, LMDB's
  page writes) and the bytes that reached the block device (`write_bytes`), from /proc/PID/io;
- after the phase, the store: messages committed so far, the file's size, and the pages each LMDB database
  uses (read from a read-only environment beside the node, as a read worker opens it);
- at the end, start to ready on the grown store after a clean stop (sealed) and after a kill -9.

`--volume cloud` confines the node's processes to a cloud volume's baseline write limits, 3,000 IOPS and
125 MB/s on the data directory's disk (bench/iolimit.py, cgroup v1 `blkio`), and adds what the group wrote to
that disk per committed message (bytes and write operations, counted by the kernel for the group). The
restarts at the end run unconfined (a start reads; the limits are on writes).

It is printed, not a row of the goals table; docs/performance.md ("As the store grows") has the figures.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import lmdb

from bench.bench_crypto import bare_ed25519_rate
from bench.bench_node import settle, workload, write_phase
from bench.iolimit import IoLimits, Written
from bench.iolimit import unavailable as io_unavailable
from bench.occupancy import Occupancy, Window
from bench.procstat import tree_cpu_seconds
from tests.fixtures.nodeproc import NodeProcess

ROLES = ("main", "writer", "verify")
IO_FIELDS = ("wchar", "write_bytes")
PAGE = 4096


def role(pid: int, main_pid: int) -> str:
    """Which of the node's processes `pid` is: the main process, the store writer or a verify worker."""
    if pid == main_pid:
        return "main"
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return "gone"
    return "writer" if b"node.storage.writer" in cmdline else "verify"


def io_counters(pid: int) -> dict[str, int]:
    """/proc/PID/io's counters (empty once the process is gone)."""
    try:
        lines = Path(f"/proc/{pid}/io").read_text().splitlines()
    except OSError:
        return {}
    return {name: int(value) for name, _, value in (line.partition(": ") for line in lines)}


@dataclass(frozen=True)
class Reading:
    cpu: dict[int, float]  # pid -> CPU seconds
    io: dict[int, dict[str, int]]  # pid -> /proc/PID/io


def read_tree(main_pid: int) -> Reading:
    cpu = tree_cpu_seconds(main_pid)
    return Reading(cpu, {p: io_counters(p) for p in cpu})


def per_role(before: Reading, after: Reading, main_pid: int) -> tuple[dict[str, float], dict[str, int]]:
    """CPU seconds by role, and the store writer's I/O bytes, between two readings (a process that
    appeared in between counts whole: a writer restarted by a failure would show as a jump)."""
    cpu = dict.fromkeys(ROLES, 0.0)
    written = dict.fromkeys(IO_FIELDS, 0)
    for pid, seconds in after.cpu.items():
        kind = role(pid, main_pid)
        if kind in cpu:
            cpu[kind] += seconds - before.cpu.get(pid, 0.0)
        if kind == "writer":
            for name in IO_FIELDS:
                written[name] += after.io[pid].get(name, 0) - before.io.get(pid, {}).get(name, 0)
    return cpu, written


@dataclass(frozen=True)
class StoreSize:
    file_bytes: int
    pages: dict[str, int]  # database -> pages in use (branch + leaf + overflow)
    entries: dict[str, int]


def store_size(data_dir: Path) -> StoreSize:
    """The store's file size and each database's pages, from a read-only environment (one reader slot)."""
    env = lmdb.open(str(data_dir), readonly=True, max_dbs=8, readahead=False)
    try:
        pages: dict[str, int] = {}
        entries: dict[str, int] = {}
        with env.begin() as txn:
            # the tree's nodes, by block (the `tree` database holds format 1's), and the index of replaced ones
            for name in ("state", "nodes", "stale"):
                stat = txn.stat(env.open_db(name.encode(), txn=txn, create=False))
                pages[name] = stat["branch_pages"] + stat["leaf_pages"] + stat["overflow_pages"]
                entries[name] = stat["entries"]
    finally:
        env.close()
    return StoreSize((data_dir / "data.mdb").stat().st_size, pages, entries)


@dataclass(frozen=True)
class Phase:
    committed: int
    rate: float  # committed msgs/s
    verify_rate: float  # one core's bare Ed25519 verifies/s around the phase
    cpu: dict[str, float]  # role -> CPU seconds per committed message
    written: dict[str, float]  # wchar / write_bytes of the writer per committed message
    store: StoreSize
    cores: Window  # what the machine's cores did while the load ran


def phase(node: NodeProcess, data_dir: Path, clients: int, messages: int, volume: Volume | None) -> Phase:
    assert node.proc is not None
    pid = node.proc.pid
    load = workload(node, clients, messages)
    settle(pid)  # the workload's accounts are committed and the node is idle again
    verify_before = bare_ed25519_rate()
    before = read_tree(pid)
    device_before = volume.written() if volume else None
    with Occupancy(pid) as occupancy:
        w = write_phase(node, load)  # bench_node's saturated phase: its clients, its watcher
    after = read_tree(pid)
    device = volume.written() if volume else None
    verify_after = bare_ed25519_rate()
    committed = max(1, int(w["committed"]))
    cpu, written = per_role(before, after, pid)
    if device is not None and device_before is not None:
        written["device_bytes"] = device.bytes - device_before.bytes
        written["device_ops"] = device.ops - device_before.ops
    return Phase(
        committed=int(w["committed"]),
        rate=w["commit_rate"],
        verify_rate=(verify_before + verify_after) / 2,
        cpu={k: v / committed for k, v in cpu.items()},
        written={k: v / committed for k, v in written.items()},
        store=store_size(data_dir),
        cores=occupancy.window(),
    )


@dataclass
class Volume:
    """The node's processes confined to a cloud volume's write limits (bench/iolimit.py)."""

    limits: IoLimits
    group: Path

    def written(self) -> Written:
        return self.limits.written(self.group)


def restarts(node: NodeProcess, data_dir: Path) -> None:
    """Start to ready on the grown store: after a clean stop (sealed: the page walk is skipped) and after a
    kill -9 (no seal: every page walked before the store is mapped)."""
    node.stop()
    began = time.monotonic()
    node.start()
    sealed = time.monotonic() - began
    assert node.proc is not None
    node.proc.kill()
    node.proc.wait()
    began = time.monotonic()
    node.start()
    walked = time.monotonic() - began
    size = (data_dir / "data.mdb").stat().st_size / 1e6
    print(
        f"\nstart to ready on the {size:,.0f} MB store: {sealed:.2f} s after a clean stop (sealed), "
        f"{walked:.2f} s after kill -9 (every page walked first)",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--phases", type=int, default=5)
    parser.add_argument("--messages", type=int, default=20_000, help="messages per phase")
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--state-history", default="", help="the node's --state-history (default: its own)")
    parser.add_argument("--volume", choices=("disk", "cloud"), default="disk", help="cloud: 3,000 IOPS, 125 MB/s")
    parser.add_argument("--data-parent", default=None, help="where the store's directory goes (default: $TMPDIR)")
    ns = parser.parse_args()
    if ns.volume == "cloud" and (why := io_unavailable()):
        raise SystemExit(f"--volume cloud: {why}")
    device = " | to the device per msg: KB / write ops" if ns.volume == "cloud" else ""
    print(
        f"\n### Ingest as the store grows: {ns.phases} phases of {ns.messages:,} messages, one node, "
        f"{'a cloud volume (3,000 write IOPS, 125 MB/s)' if ns.volume == 'cloud' else 'the machine disk'}\n\n"
        "| phase | committed msgs/s | ÷ verify/s | node CPU µs/msg: main / writer / verify | "
        "writer's bytes/msg: to the kernel / to the disk | after: msgs committed | file MB | "
        f"pages in use: state / tree / stale index | bytes in use per msg{device} |\n"
        f"|---:|---:|---:|---|---|---:|---:|---|---:|{'---|' if device else ''}",
        flush=True,
    )
    total = 0
    with tempfile.TemporaryDirectory(dir=ns.data_parent) as d, contextlib.ExitStack() as stack:
        data_dir = Path(d) / "data"
        history = ["--state-history", ns.state_history] if ns.state_history else []
        node = NodeProcess(data_dir, "--web-addr", "", "--block-interval", "0.2", *history).start()
        volume: Volume | None = None
        if ns.volume == "cloud":
            assert node.proc is not None
            limits = stack.enter_context(IoLimits())
            volume = Volume(limits, limits.confine(node.proc.pid, data_dir))
        try:
            for n in range(1, ns.phases + 1):
                p = phase(node, data_dir, ns.clients, ns.messages, volume)
                total += p.committed
                used = sum(p.store.pages.values()) * PAGE
                cpu = " / ".join(f"{p.cpu[k] * 1e6:.0f}" for k in ROLES)
                cpu_sum = sum(p.cpu.values()) * 1e6
                extra = ""
                if volume is not None:
                    extra = f" {p.written['device_bytes'] / 1e3:.1f} / {p.written['device_ops']:.2f} |"
                print(
                    f"| {n} | {p.rate:,.0f} | {p.rate / p.verify_rate:.2f} | {cpu} (sum {cpu_sum:.0f}) "
                    f"| {p.written['wchar'] / 1e3:.1f} KB / {p.written['write_bytes'] / 1e3:.1f} KB | {total:,} "
                    f"| {p.store.file_bytes / 1e6:.0f} | {p.store.pages['state']:,} / {p.store.pages['nodes']:,} "
                    f"/ {p.store.pages['stale']:,} "
                    f"| {used / total:,.0f} |{extra}",
                    flush=True,
                )
                print(f"  (phase {n}: {p.cores.describe()})", file=sys.stderr, flush=True)
            if volume is not None:
                volume.limits.close()  # the restarts run unconfined
            restarts(node, data_dir)
        finally:
            node.stop()
    print(
        "\n(phase n runs on the store the phases before it left; `msgs committed` counts the measured phases' "
        "messages only, not the workloads' account set-up, which the file and pages include)",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
