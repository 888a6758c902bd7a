"""Benchmark of store integrity: `chain-node verify-store` keys/s, and the start-up check, on a built store.

    python -m bench.bench_store [--keys 1000000] [--block-keys 10000]

Builds a store in a temp dir: genesis, then blocks of `--block-keys` public-state records each (random
20-byte account keys, 120-byte values) with their tree nodes, real block headers (parent hash, state root,
header hash) and the head record, committed one LMDB transaction per block as the node does. The blocks
carry no messages: verify-store checks hashes, links and the root, it does not re-execute. Then it times
`Chain.open` (the start-up checks: LMDB file walk, identity, head chain, root node) and one
`chain-node verify-store` subprocess beside the baseline of reading `data.mdb` in order, and prints a
markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from chain.v1 import block_pb2
from node import merkle
from node.block import ZERO_HASH, header_hash
from node.chain import Chain
from node.constants import PROTOCOL_VERSION
from node.params import ChainParams
from node.storage import schema
from node.storage.tree_layout import root_record


def build(path: Path, keys: int, block_keys: int) -> int:
    """A store with `keys` public-state records; returns its height."""
    chain = Chain.open(path, ChainParams(genesis_time_ms=1_800_000_000_000), sync=False)
    try:
        parent = chain.head()
        made = 0
        while made < keys:
            batch = min(block_keys, keys - made)
            changes = {schema.account_key(os.urandom(20)): os.urandom(120) for _ in range(batch)}
            number = parent.header.number + 1
            with chain.read() as (_view, nodes):
                root_at = nodes.root_location(parent.header.state_root)
                result = merkle.update(
                    nodes, parent.header.state_root, changes, here=schema.u64(number), root_at=root_at
                )
            roots = root_record(result)
            header = block_pb2.BlockHeader(
                number=parent.header.number + 1,
                parent_hash=parent.hash,
                timestamp_ms=parent.header.timestamp_ms + 1000,
                state_root=result.root,
                message_root=ZERO_HASH,
                network=chain.params.network,
                protocol_version=PROTOCOL_VERSION,
            )
            block = block_pb2.Block(header=header, hash=header_hash(header))
            raw = block.SerializeToString(deterministic=True)
            writes: dict[bytes, bytes | None] = {**changes, **roots}
            writes[schema.block_key(header.number)] = raw
            writes[schema.meta_key(schema.META_HEAD)] = raw
            chain.store.commit(writes, result.new_nodes, number)
            parent = block
            made += batch
        return int(parent.header.number)
    finally:
        chain.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--block-keys", type=int, default=10_000)
    ns = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-store-") as tmp:
        path = Path(tmp) / "node"
        started = time.perf_counter()
        height = build(path, ns.keys, ns.block_keys)
        built = time.perf_counter() - started
        size = (path / "data.mdb").stat().st_size
        started = time.perf_counter()
        with open(path / "data.mdb", "rb") as f:  # the baseline: the bytes alone, read in order
            while f.read(1 << 20):
                pass
        plain = time.perf_counter() - started
        started = time.perf_counter()
        Chain.open(path).close()
        opened = time.perf_counter() - started
        cmd = [sys.executable, "-m", "node.server.main", "verify-store", "--data-dir", str(path)]
        started = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, check=True)
        wall = time.perf_counter() - started
        doc = json.loads(proc.stdout)
    print(
        f"\nstore: {ns.keys:,} public-state keys in {height} blocks, "
        f"data.mdb {size / 2**20:,.0f} MiB, built in {built:.0f} s\n"
    )
    print("| what | time | rate |")
    print("|---|---|---|")
    print(f"| baseline: read data.mdb in order (1 MiB reads) | {plain:.2f} s | {size / 2**20 / plain:,.0f} MiB/s |")
    print(f"| start-up check (`Chain.open`) | {opened:.2f} s | {size / 2**20 / opened:,.0f} MiB/s |")
    print(
        f"| `chain-node verify-store` | {doc['seconds']:.1f} s ({wall:.1f} s with interpreter start) "
        f"| {doc['keys_per_s']:,.0f} keys/s; {doc['tree_nodes']:,} tree nodes checked |"
    )
    phases = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in doc["phases"].items())
    print(f"\nverify-store phases: {phases}")


if __name__ == "__main__":
    main()
