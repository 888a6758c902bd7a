"""`make bench`: every benchmark of the core, each printing a markdown table.

    python -m bench [--quick]

--quick limits the Merkle tree sizes to 100k keys (the full run goes to 1M).
"""

from __future__ import annotations

import argparse
import subprocess
import sys


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    ns = parser.parse_args()
    runs = [
        ["bench.bench_crypto"],
        ["bench.bench_transition", "--messages", "5000"],
        ["bench.bench_merkle", *(["--max-keys", "100000"] if ns.quick else [])],
        ["bench.bench_node", "--messages", "10000" if ns.quick else "20000"],
        ["bench.bench_replicated", "--messages", "2000" if ns.quick else "4000", "--trials", "10"],
        ["bench.bench_gateway", "--sse-clients", "2000" if ns.quick else "10000"],
        ["bench.bench_store", "--keys", "100000" if ns.quick else "1000000"],
        ["bench.bench_rest", "--seconds", "5" if ns.quick else "10", "--connections", "32"],
        ["bench.bench_statesync", "--keys", "100000" if ns.quick else "1000000"],
        ["bench.bench_tracing", "--messages", "5000" if ns.quick else "10000", "--rounds", "2"],
    ]
    for run in runs:
        print(f"\n## {run[0]}", flush=True)
        subprocess.run([sys.executable, "-m", *run], check=True)


if __name__ == "__main__":
    main()
