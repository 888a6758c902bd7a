"""State sync: throughput next to a plain copy of the same store, and the time an empty member takes to join.

    python -m bench.bench_statesync [--keys N]

The store is built directly with the Chain/LMDB API: N public-state keys (32-byte ids, 64-byte values)
written as the state of ten blocks without messages, each block's tree update and records made by the
transition's own epilogue (start_block, finish_block, record_block): a fixture never replayed (members
join it by state sync). One member runs on it over a one-member etcd (the log starts after its head),
takes a snapshot, and then:

- plain copy: the snapshot's `data.mdb` copied to another file and fsynced (the floor for moving the bytes);
- state sync: `chain-node state-sync` into an empty data dir: manifest, chunks over gRPC on loopback, each
  chunk's BLAKE3 checked, fsync, then the restored store verified (head, every tree node) and renamed;
  the transfer and the verification are timed apart from the log lines;
- join: an empty member started with the ordinary flags, until it reports ready and holds the leader's
  height at the time it was started.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

from chain.v1 import block_pb2, rpc_pb2
from node.block import header_hash
from node.chain import Chain
from node.merkle import InProcessUpdater
from node.server.devnet import new_devnet
from node.state.transition import finish_block, record_block, start_block
from node.storage import schema
from tests.fixtures.etcdproc import EtcdCluster
from tests.fixtures.replicaset import ReplicaSet, status
from tests.fixtures.statesync import run_state_sync

BLOCKS = 10
STAMP = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})")


def build_store(data_dir: Path, keys: int) -> float:
    """A devnet store whose state holds `keys` public keys; seconds taken."""
    started = time.perf_counter()
    params, _ = new_devnet(data_dir)
    chain = Chain.open(data_dir, params, sync=False)
    per = keys // BLOCKS
    for b in range(BLOCKS):
        with chain.read() as (view, nodes):
            start = start_block(view)
            for _ in range(per):
                start.overlay.put(schema.commit_key(os.urandom(32), os.urandom(32)), os.urandom(64))
            header = block_pb2.BlockHeader(
                number=start.number, parent_hash=start.parent.hash, timestamp_ms=int(time.time() * 1000),
                network=params.network, protocol_version=start.parent.header.protocol_version,
            )  # fmt: skip
            header.state_root, tree_nodes = finish_block(start, InProcessUpdater(nodes), [], header)
            out = record_block(start, block_pb2.Block(header=header, hash=header_hash(header)), tree_nodes, [], [])
        chain.commit(out)
        print(f"  built block {b + 1}/{BLOCKS}", file=sys.stderr, flush=True)
    chain.close()
    return time.perf_counter() - started


def stamp(lines: list[str], needle: str) -> float:
    for line in lines:
        if needle in line and (m := STAMP.match(line)):
            return datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
    raise LookupError(f"no log line with {needle!r}")


def plain_copy(source: Path, dest: Path) -> float:
    dest.parent.mkdir(parents=True)
    started = time.perf_counter()
    shutil.copyfile(source, dest)
    with dest.open("rb+") as f:
        os.fsync(f.fileno())
    return time.perf_counter() - started


def mb_s(size: int, seconds: float) -> str:
    return f"{size / seconds / 1e6:,.0f} MB/s"


def run(work: Path, keys: int) -> None:
    built = build_store(work / "n0", keys)
    etcd = EtcdCluster(work / "etcd", 1).start()
    nodes = ReplicaSet(work, etcd, "--empty-block-interval", "0.2", "--web-addr", "", block_interval=0.2)
    try:
        leader = nodes.add()
        while status(leader).block_height < BLOCKS + 2:  # a snapshot at a block the log holds
            time.sleep(0.1)
        with leader.client(timeout=600) as c:
            t = time.perf_counter()
            snap = c.admin.CreateSnapshot(rpc_pb2.CreateSnapshotRequest()).snapshot  # type: ignore[union-attr]
            snapshot_s = time.perf_counter() - t
        store = work / "n0" / "snapshots" / snap.name / "data.mdb"
        size = store.stat().st_size
        time.sleep(2)  # the member publishes the snapshot it serves on its next maintenance round
        copy_s = plain_copy(store, work / "copy" / "data.mdb")
        t = time.perf_counter()
        result = run_state_sync(nodes, work / "synced", "bench-sync")
        sync_s = time.perf_counter() - t
        assert result.returncode == 0, result.stderr[-2000:]
        lines = result.stderr.splitlines()
        transfer_s = stamp(lines, "chunks received and checked") - stamp(lines, "state sync: fetching")
        verify_s = stamp(lines, "join: state-synced") - stamp(lines, "chunks received and checked")
        target = status(leader).block_height
        t = time.perf_counter()
        joiner = nodes.add()
        while status(joiner).block_height < target:
            time.sleep(0.05)
        join_s = time.perf_counter() - t
    finally:
        nodes.stop()
        etcd.stop()
    print(f"| store | {keys:,} keys, {size / 1e6:,.0f} MB (`data.mdb` of the snapshot at block {snap.block_number}) |")
    print("| --- | --- |")
    print(f"| building it (Chain/LMDB API, not timed against anything) | {built:.1f} s |")
    print(f"| CreateSnapshot (compacting copy + manifest hashing) | {snapshot_s:.1f} s |")
    print(f"| plain copy + fsync of `data.mdb` | {copy_s:.2f} s, {mb_s(size, copy_s)} |")
    transfer = f"{transfer_s:.2f} s, {mb_s(size, transfer_s)}"
    print(f"| state sync: transfer (gRPC, loopback, BLAKE3 per chunk, fsync) | {transfer} |")
    print(f"| state sync: verify the restored store (head, every tree node) and rename | {verify_s:.2f} s |")
    print(f"| `chain-node state-sync` end to end (process start to exit) | {sync_s:.1f} s |")
    print(f"| empty member: start to ready and at the leader's height | {join_s:.1f} s |")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--keys", type=int, default=1_000_000)
    ns = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-statesync-") as tmp:
        run(Path(tmp), ns.keys)


if __name__ == "__main__":
    main()
