"""A scale-out of two members at once: each state-syncs from another serving member (the joiners spread by
a hash of their ids over the members serving a fresh snapshot), each within the serving members'
`--state-sync-rate`, measured as the bytes that reach its staging file over time."""

from __future__ import annotations

import asyncio
import subprocess
import time
from pathlib import Path

from node.server.ordering.etcd.client import EtcdClient
from node.server.ordering.etcd.join import served_snapshots, sources
from node.server.ordering.etcd.log import Keys
from node.server.snapshots.staging import STAGING_DIR
from node.server.snapshots.sync_client import Peer
from tests.fixtures.etcdproc import EtcdCluster
from tests.fixtures.replicaset import ReplicaSet
from tests.fixtures.statesync import COMPACT, advance, fill, snapshot, start_state_sync, wait_compacted

CHUNK = 64 * 1024
RATE = 6 * CHUNK  # bytes/s each serving member sends, all its streams together


def served(etcd: EtcdCluster) -> list[Peer]:
    async def run() -> list[Peer]:
        client = EtcdClient(etcd.endpoints)
        try:
            return await served_snapshots(client, Keys(b"/chain-node/"))
        finally:
            await client.close()

    return asyncio.run(run())


def joiners_on_two_sources(peers: list[Peer]) -> tuple[str, str]:
    """Two joiner ids whose first choices are different members (the ranking is a fixed hash)."""
    first = {f"j{i}": sources(peers, f"j{i}")[0].node_id for i in range(32)}
    a = "j0"
    b = next(j for j, src in first.items() if src != first[a])
    return a, b


def watch(procs: dict[str, subprocess.Popen[str]], dirs: dict[str, Path]) -> dict[str, list[tuple[float, int]]]:
    """(time, staged bytes) of each joiner until both exit."""
    samples: dict[str, list[tuple[float, int]]] = {j: [] for j in procs}
    deadline = time.monotonic() + 120
    while any(p.poll() is None for p in procs.values()):
        assert time.monotonic() < deadline, "state sync did not finish"
        for j, d in dirs.items():
            staged = d / STAGING_DIR / "data.mdb"
            if procs[j].poll() is None and staged.exists():
                samples[j].append((time.monotonic(), staged.stat().st_size))
        time.sleep(0.05)
    return samples


def test_two_joiners_sync_from_two_sources_within_the_rate(tmp_path: Path, etcd1: EtcdCluster) -> None:
    args = (*COMPACT, "--snapshot-chunk-bytes", str(CHUNK), "--state-sync-rate", str(RATE))
    nodes = ReplicaSet(tmp_path, etcd1, *args, block_interval=0.1).start(3)
    try:
        fill(nodes.nodes[0], 600)
        taken = [snapshot(nodes.nodes[0]), snapshot(nodes.nodes[1])]
        advance(nodes, 5)
        wait_compacted(etcd1, min(s.block_number for s in taken))
        peers = served(etcd1)
        assert sorted(p.node_id for p in peers) == ["n0", "n1"]
        a, b = joiners_on_two_sources(peers)
        dirs = {a: tmp_path / a, b: tmp_path / b}
        procs = {j: start_state_sync(nodes, dirs[j], j) for j in (a, b)}  # at once
        samples = watch(procs, dirs)
        outputs = {j: p.communicate() for j, p in procs.items()}
        for j, p in procs.items():
            assert p.returncode == 0, outputs[j][1][-2000:]
        used = {j: next(line for line in outputs[j][0].splitlines() if "state-synced block" in line) for j in procs}
        origins = {j: line.split(" from ")[1].split()[0] for j, line in used.items()}
        assert len(set(origins.values())) == 2, f"both joiners synced from one member: {used}"
        for j, points in samples.items():
            (t0, s0), (t1, s1) = points[0], points[-1]
            assert s1 - s0 >= 6 * CHUNK, f"{j}: too little to measure ({s1 - s0} bytes)"
            rate = (s1 - s0) / (t1 - t0)
            # one chunk may go at once, the rest at the pace; 0.2 s of sampling slack either side
            assert s1 - s0 - CHUNK <= RATE * (t1 - t0 + 0.2), f"{j} received {rate:.0f} B/s over a {RATE} B/s cap"
    finally:
        nodes.stop()
