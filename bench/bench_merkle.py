"""Benchmark of the state tree on LMDB: build, proof generation, 1,000-key block updates, and primitives.

    python -m bench.bench_merkle [--max-keys N] [--block-keys 10000] [--growth-blocks 10]

For each size (10k, 100k, 1M keys, up to --max-keys) a fresh LMDB tree is built in a temp dir: a bulk build
of most keys, then `--growth-blocks` blocks of `--block-keys` keys, each one `update` + one write
transaction. Then, on that tree: inclusion-proof generation, proof verification, and 1,000-key blocks
(half new keys, half overwrites) measured in write transactions that are aborted, so the tree stays put.
The same run measures the primitives (blake3 of 64 bytes, one LMDB get of a random node) to express a
proof as a multiple of them. Prints markdown tables.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass

import lmdb
from blake3 import blake3

from node.merkle import build_tree_hashed, key_path, prove, update, value_hash, verify_proof
from node.merkle.lmdb_store import LmdbNodeStore
from node.merkle.query import witness

SIZES = (10_000, 100_000, 1_000_000)
UPDATE_BLOCK = 1_000


def key_of(i: int) -> bytes:
    return b"key:" + i.to_bytes(8, "big")


def value_of(key: bytes) -> bytes:
    """Values live outside the tree; the benchmark derives them from the key."""
    return b"value:" + key[4:]


@dataclass(frozen=True)
class SizeResult:
    keys: int
    bulk_s: float
    blocks_s: float
    block_keys: int
    nodes: int
    proof_s: float
    gets_per_proof: float
    verify_s: float
    update_s: float
    write_s: float
    update_nodes: float
    get_s: float


def per_op(fn: Callable[[], object], seconds: float = 0.5) -> float:
    """Seconds per call of `fn`, calling it repeatedly for about `seconds`."""
    calls = 0
    start = time.perf_counter()
    while True:
        fn()
        calls += 1
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return elapsed / calls


def random_node_hashes(txn: lmdb.Transaction, db: lmdb._Database, rnd: random.Random, count: int) -> list[bytes]:
    """Hashes of stored nodes picked uniformly (node hashes are uniform, so seek to random points)."""
    hashes: list[bytes] = []
    with txn.cursor(db=db) as cursor:
        while len(hashes) < count:
            if cursor.set_range(rnd.randbytes(32)):
                hashes.append(bytes(cursor.key()))
    return hashes


def time_blake3_64() -> float:
    data = os.urandom(64)
    rounds = 10_000

    def run() -> None:
        for _ in range(rounds):
            blake3(data).digest()

    return per_op(run) / rounds


def time_lmdb_get(env: lmdb.Environment, db: lmdb._Database, hashes: list[bytes]) -> float:
    with env.begin(db=db) as txn:

        def run() -> None:
            get = txn.get
            for h in hashes:
                get(h)

        return per_op(run) / len(hashes)


def measure_size(size: int, block_keys: int, growth_blocks: int, rnd: random.Random, workdir: str) -> SizeResult:
    env = lmdb.open(
        os.path.join(workdir, f"tree-{size}"),
        map_size=1 << 34,
        max_dbs=1,
        sync=False,  # durability is the node's business; the benchmark measures the tree
        metasync=False,
        readahead=False,
    )
    db = env.open_db(b"merkle_nodes")
    blocks = min(growth_blocks, size // block_keys)
    bulk = size - blocks * block_keys

    start = time.perf_counter()
    built = build_tree_hashed({key_path(k): value_hash(value_of(k)) for k in map(key_of, range(bulk))})
    with env.begin(write=True) as txn:
        LmdbNodeStore(txn, db).put_nodes(built.new_nodes)
    root = built.root
    del built
    bulk_s = time.perf_counter() - start

    start = time.perf_counter()
    for b in range(blocks):
        first = bulk + b * block_keys
        changes: dict[bytes, bytes | None] = {
            key: value_of(key) for key in map(key_of, range(first, first + block_keys))
        }
        with env.begin(write=True) as txn:
            store = LmdbNodeStore(txn, db)
            result = update(store, root, changes)
            store.put_nodes(result.new_nodes)
        root = result.root
    blocks_s = time.perf_counter() - start
    with env.begin() as txn:
        nodes = int(txn.stat(db)["entries"])

    sample = [key_of(rnd.randrange(size)) for _ in range(20_000)]
    with env.begin(db=db) as txn:
        store = LmdbNodeStore(txn, db)
        depth = statistics.fmean(witness(store, root, key_path(k)).depth for k in sample[:2_000])  # warms up
        proof_s = per_op(lambda: [prove(store, root, k, value_of) for k in sample[:2_000]], 1.0) / 2_000
        proofs = [prove(store, root, k, value_of) for k in sample[:2_000]]
        hashes = random_node_hashes(txn, db, rnd, 20_000)
    verify_s = per_op(lambda: [verify_proof(p, root) for p in proofs], 1.0) / len(proofs)
    get_s = time_lmdb_get(env, db, hashes)

    update_times: list[float] = []
    write_times: list[float] = []
    new_nodes: list[int] = []
    for rep in range(5):
        changes = {key_of(size + rep * UPDATE_BLOCK + i): b"new" for i in range(UPDATE_BLOCK // 2)}
        changes.update({key_of(rnd.randrange(size)): b"changed" for _ in range(UPDATE_BLOCK // 2)})
        txn = env.begin(write=True, db=db)
        try:
            store = LmdbNodeStore(txn, db)
            start = time.perf_counter()
            result = update(store, root, changes)
            mid = time.perf_counter()
            store.put_nodes(result.new_nodes)
            end = time.perf_counter()
        finally:
            txn.abort()  # keep the tree as it was for the next repetition
        update_times.append((mid - start) / len(changes))
        write_times.append((end - mid) / len(changes))
        new_nodes.append(len(result.new_nodes))
    env.close()
    return SizeResult(
        keys=size,
        bulk_s=bulk_s,
        blocks_s=blocks_s,
        block_keys=blocks * block_keys,
        nodes=nodes,
        proof_s=proof_s,
        gets_per_proof=depth + 1,
        verify_s=verify_s,
        update_s=statistics.median(update_times),
        write_s=statistics.median(write_times),
        update_nodes=statistics.fmean(new_nodes),
        get_s=get_s,
    )


def rate(seconds: float) -> str:
    return f"{1 / seconds:,.0f}"


def report(results: list[SizeResult], blake3_s: float) -> str:
    lines = [
        f"Primitives: blake3(64 B) = {blake3_s * 1e6:.2f} µs ({rate(blake3_s)} ops/s); "
        "LMDB get of a random node per size below.",
        "",
        "| keys | stored nodes | bulk build | 10k-key blocks | LMDB get | proofs/s | µs/proof | LMDB gets/proof "
        "| proof / blake3 | proof / get | verifies/s | 1k block: keys/s (update) | keys/s (+ write) "
        "| new nodes/1k block |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        blocks = f"{r.block_keys / r.blocks_s:,.0f} keys/s" if r.block_keys else "-"
        bulk_keys = r.keys - r.block_keys
        bulk = f"{bulk_keys:,} in {r.bulk_s:.1f} s" if bulk_keys else "-"
        lines.append(
            f"| {r.keys:,} | {r.nodes:,} | {bulk} | {blocks} | {r.get_s * 1e6:.2f} µs ({rate(r.get_s)}/s) "
            f"| {rate(r.proof_s)} | {r.proof_s * 1e6:.1f} | {r.gets_per_proof:.1f} "
            f"| {r.proof_s / blake3_s:.0f} | {r.proof_s / r.get_s:.0f} | {rate(r.verify_s)} "
            f"| {rate(r.update_s)} | {rate(r.update_s + r.write_s)} | {r.update_nodes:,.0f} |"
        )
    lines += ["", "Where a proof's time goes (gets/proof x get + 2 blake3 (key path, value check) + the rest):", ""]
    for r in results:
        gets = r.gets_per_proof * r.get_s
        hashes = 2 * blake3_s
        rest = r.proof_s - gets - hashes
        lines.append(
            f"- {r.keys:,} keys: {r.proof_s * 1e6:.1f} µs = {r.gets_per_proof:.1f} gets ({gets * 1e6:.1f} µs) "
            f"+ 2 blake3 ({hashes * 1e6:.1f} µs) + {rest * 1e6:.1f} µs of Python (decode, walk, proof object); "
            f"verify = {r.verify_s * 1e6:.1f} µs ~ {r.verify_s / blake3_s:.0f} blake3 "
            f"for ~{r.gets_per_proof + 2:.0f} hashes"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--max-keys", type=int, default=SIZES[-1])
    parser.add_argument("--block-keys", type=int, default=10_000)
    parser.add_argument("--growth-blocks", type=int, default=10)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rnd = random.Random(args.seed)
    blake3_s = time_blake3_64()
    results: list[SizeResult] = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-merkle-") as workdir:
        for size in (s for s in SIZES if s <= args.max_keys):
            results.append(measure_size(size, args.block_keys, args.growth_blocks, rnd, workdir))
            print(f"... {size:,} keys done at {time.perf_counter() - started:.0f} s", flush=True)
    print()
    print(report(results, blake3_s))
    print(f"\nTotal {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
