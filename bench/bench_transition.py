"""Per-message costs of the core pipeline next to the bare primitives it uses.

    python -m bench.bench_transition [--messages N]

Measured in one run, on one core:
- bare primitives: Ed25519 verify (cryptography), BLAKE3 of 200 bytes, one LMDB put (synced commit of one
  key, and one put inside a large transaction);
- verify: canonical re-encode + hash + Ed25519 signature check of a message (node.codec.check_envelope);
- validate+apply: structural + stateful validation and application inside a block build (no signature);
- commit: the block's LMDB write transaction including tree nodes;
- proof generation: GetOperationProof for random accounts.
Ratios are against the bare primitive beside them.
"""

from __future__ import annotations

import argparse
import os
import random
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import lmdb
from blake3 import blake3

from chain.v1 import message_pb2 as pb
from chain.v1 import rpc_pb2
from node.chain import Chain
from node.codec import check_envelope
from node.crypto.ed25519 import Ed25519Verifier, verify_ed25519
from node.query.reader import Reader
from node.sdk.keys import Ed25519Key
from node.storage import schema
from tests.harness import Harness, commit_meta


def rate(fn: Callable[[], object], n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        fn()
    return n / (time.perf_counter() - start)


def bare_primitives(tmp: Path) -> dict[str, float]:
    key = Ed25519Key.generate()
    msg = os.urandom(32)
    sig = key.sign(msg)
    data = os.urandom(200)
    env = lmdb.open(str(tmp / "bare"), map_size=1 << 30)
    counter = iter(range(10**9))

    def synced_put() -> None:
        with env.begin(write=True) as txn:
            txn.put(next(counter).to_bytes(8, "big"), data)

    def batched_puts() -> None:
        with env.begin(write=True) as txn:
            for _ in range(10_000):
                txn.put(os.urandom(16), data)

    out = {
        "ed25519_verify": rate(lambda: verify_ed25519(key.public_key, msg, sig), 3000),
        "blake3_200B": rate(lambda: blake3(data).digest(), 100_000),
        "lmdb_synced_commit": rate(synced_put, 300),
        "lmdb_put_in_txn": 10_000 * rate(batched_puts, 5),
    }
    env.close()
    return out


def workload(h: Harness, n: int) -> list[pb.Message]:
    """A mix of the common writes: commits, refs, likes, follows, profile edits."""
    actors = [h.actor(units=5) for _ in range(20)]
    projects = []
    for a in actors:
        out = h.commit(a.b.project_create("bench"))
        pid = out.applied[0].message.hash
        base = commit_meta(int.from_bytes(pid[:4], "big"))
        h.commit(a.b.commit_bundle(pid, [base]))
        projects.append((a, pid, base.hash))
    msgs: list[pb.Message] = []
    ref_nonce = {pid: 0 for _, pid, _ in projects}
    heads = {pid: head for _, pid, head in projects}
    rnd = 0
    while len(msgs) < n:
        kind = rnd % 4  # each round, every project does the same kind of write
        for j, (a, pid, _) in enumerate(projects):
            other = actors[(j + 1 + rnd) % len(actors)]
            ts = h.now + (rnd % 250)
            if kind == 0:
                c = commit_meta(10_000_000 + rnd * 100 + j, heads[pid])
                ref_nonce[pid] += 1
                msgs.append(a.b.commit_bundle(pid, [c], timestamp=ts))
                msgs.append(a.b.ref_update(pid, b"refs/heads/main", c.hash, ref_nonce[pid], timestamp=ts))
                heads[pid] = c.hash
            elif kind == 1:
                msgs.append(other.b.like(pid, heads[pid], timestamp=ts))
            elif kind == 2:
                msgs.append(a.b.account_data(pb.ACCOUNT_FIELD_BIO, f"bio {rnd}", timestamp=ts))
            else:
                msgs.append(a.b.project_metadata(pid, pb.PROJECT_FIELD_DESCRIPTION, f"d{rnd}", timestamp=ts))
        rnd += 1
    return msgs[:n]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=5000)
    ns = parser.parse_args()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        bare = bare_primitives(tmp)
        h = Harness(tmp / "chain")
        msgs = workload(h, ns.messages)

        verifier = Ed25519Verifier()
        t = time.perf_counter()
        for m in msgs:
            check_envelope(m, verifier)
        verify_rate = len(msgs) / (time.perf_counter() - t)

        t = time.perf_counter()
        out = h.chain.build(h.now * 1000, msgs)
        build_rate = len(msgs) / (time.perf_counter() - t)
        assert not out.dropped, out.dropped[:3]
        t = time.perf_counter()
        h.chain.commit(out)
        commit_s = time.perf_counter() - t

        chain: Chain = h.chain
        owners = [m.data.owner_address for m in msgs]
        rng = random.Random(1)
        with chain.read() as (view, nodes):
            reader = Reader(view, nodes)
            keys = [schema.account_key(rng.choice(owners)) for _ in range(2000)]
            it = iter(keys)
            proof_rate = rate(lambda: reader.get_operation_proof(rpc_pb2.GetOperationProofRequest(key=next(it))), 2000)

        rows = [
            ("Ed25519 verify (bare, cryptography)", bare["ed25519_verify"], ""),
            ("BLAKE3 of 200 bytes (bare)", bare["blake3_200B"], ""),
            ("LMDB synced commit of one put (bare)", bare["lmdb_synced_commit"], ""),
            ("LMDB put inside a transaction (bare)", bare["lmdb_put_in_txn"], ""),
            ("verify: re-encode + hash + Ed25519", verify_rate, f"{verify_rate / bare['ed25519_verify']:.2f}x Ed25519"),
            (
                "validate+apply in a block (no signature)",
                build_rate,
                f"1 msg = {bare['blake3_200B'] / build_rate:.0f} BLAKE3",
            ),
            (
                f"commit of a {len(msgs)}-message block",
                len(msgs) / commit_s,
                f"{len(out.writes) + len(out.tree_nodes)} keys, {commit_s * 1000:.0f} ms",
            ),
            (
                "proof generation (GetOperationProof)",
                proof_rate,
                f"1 proof = {bare['lmdb_put_in_txn'] / proof_rate:.1f} LMDB puts",
            ),
        ]
        print(f"\n### Core pipeline, {len(msgs)} mixed messages in one block\n")
        print("| operation | per second | relative |")
        print("|---|---:|---|")
        for name, value, rel in rows:
            print(f"| {name} | {value:,.0f} | {rel} |")
        end_to_end = 1 / (1 / verify_rate + 1 / build_rate + commit_s / len(msgs))
        print(f"\nOne core, verify + validate/apply + commit: {end_to_end:,.0f} msgs/s")


if __name__ == "__main__":
    main()
