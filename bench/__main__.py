"""`make bench`: every benchmark, each printing its own markdown tables, then the table of goals.

    python -m bench [--quick] [--only MODULE ...] [--rows-file FILE]
    make bench                      # the full run
    make bench BENCH_QUICK=1        # --quick: smaller loads, about 10-15 minutes on the 2-core machine

Each module runs in its own process (``python -m bench.bench_x ARGS``); the modules that measure a goal
of the goals table hand their figure in through bench/table.py (``emit``), and the last thing printed
is that table, one line per goal, every figure a ratio to a baseline taken in the same run (or, for the
start-up row, seconds). A module that fails does not stop the run: its rows print as "not measured" with
its exit status, and ``python -m bench`` exits 1 at the end. A module whose load generator (h2load, wrk) is
not installed is skipped at once, said before the run and in its rows, and also makes the exit status 1:
``make bench`` installs them, ``python -m bench`` alone does not. A module of the table that is not in the tree
yet (another branch) prints as "not measured (not merged)".

--quick shrinks the loads (Merkle/store/state-sync to 100k keys, 2,000 SSE clients instead of 10,000,
3 failover trials, shorter wrk runs). Rows measured with a smaller load than the goal's say so in their
"how" column.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from bench.table import GOALS, ROWS_ENV, read_rows, render


@dataclass(frozen=True)
class Run:
    module: str
    full: tuple[str, ...] = ()
    quick: tuple[str, ...] = ()
    needs: tuple[str, ...] = ()  # external programs it cannot run without (`make bench` installs them)


def lacking(run: Run) -> list[str]:
    """The commands `run` needs that are not on PATH."""
    return [tool for tool in run.needs if shutil.which(tool) is None]


RUNS: tuple[Run, ...] = (
    Run("bench.bench_startup", ("--runs", "7"), ("--runs", "5")),
    Run("bench.bench_crypto"),
    Run("bench.bench_transition", ("--messages", "5000"), ("--messages", "5000")),
    Run("bench.bench_merkle", (), ("--max-keys", "100000")),
    Run("bench.bench_node", ("--messages", "20000"), ("--messages", "10000")),
    Run("bench.bench_growth", ("--phases", "5", "--messages", "20000"), ("--phases", "3", "--messages", "10000")),
    Run("bench.bench_tree_layout", (), ("--blocks", "60", "--walks", "1000")),
    Run("bench.bench_push", ("--commits", "100000"), ("--commits", "20000", "--walks", "10000,20000")),
    Run(
        "bench.bench_reads",
        ("--seconds", "10", "--connections", "32"),
        ("--seconds", "5", "--connections", "32"),
        ("h2load",),
    ),
    Run(
        "bench.bench_replicated",
        ("--messages", "9000", "--trials", "10", "--member-cores", "0.5"),
        ("--messages", "6000", "--rounds", "3", "--trials", "3", "--member-cores", "0.5"),
        ("etcd",),
    ),
    Run("bench.bench_gateway", ("--sse-clients", "10000"), ("--sse-clients", "2000", "--seconds", "3")),
    Run("bench.bench_store", ("--keys", "1000000"), ("--keys", "100000")),
    Run(
        "bench.bench_rest",
        ("--seconds", "10", "--connections", "32"),
        ("--seconds", "5", "--connections", "32"),
        ("wrk",),
    ),
    Run(
        "bench.bench_under_writes",
        ("--seconds", "5", "--rounds", "2"),
        ("--seconds", "3", "--rounds", "1"),
        ("h2load", "wrk"),
    ),
    Run(
        "bench.bench_commit_latency",
        ("--messages", "20000", "--seconds", "10"),
        ("--messages", "10000", "--seconds", "5"),
        ("etcd",),
    ),
    Run("bench.bench_statesync", ("--keys", "1000000"), ("--keys", "100000"), ("etcd",)),
    Run(
        "bench.bench_consistent_reads",
        ("--seconds", "5", "--rounds", "3"),
        ("--seconds", "3", "--rounds", "2"),
        ("etcd", "h2load"),
    ),
    Run("bench.bench_tracing", ("--messages", "10000", "--rounds", "2"), ("--messages", "5000", "--rounds", "2")),
    Run(
        "bench.bench_tls",
        ("--messages", "10000", "--rounds", "6", "--seconds", "12", "--slices", "4"),
        ("--messages", "5000", "--rounds", "4", "--seconds", "6", "--slices", "2"),
        ("h2load",),
    ),
)


def present(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def run_all(runs: list[Run], quick: bool, rows_file: Path) -> dict[str, str]:
    """Run each module; what to say in the table for a module that handed nothing in, by module."""
    missing: dict[str, str] = {}
    env = dict(os.environ, **{ROWS_ENV: str(rows_file)})
    absent = sorted({tool for run in runs for tool in lacking(run)})
    if absent:  # said before the run, not after it: `python -m bench` alone installs nothing
        print(
            f"not installed: {', '.join(absent)}; the modules that need them are skipped (`make bench` installs "
            "the programs the benches need)",
            flush=True,
        )
    for run in runs:
        if not present(run.module):
            missing[run.module] = f"{run.module} is not merged yet"
            print(f"\n## {run.module}: not in this tree, skipped", flush=True)
            continue
        if tools := ", ".join(lacking(run)):
            missing[run.module] = f"{run.module} needs {tools}, not installed (`make bench` installs it)"
            print(f"\n## {run.module}: skipped, {tools} not installed", flush=True)
            continue
        args = run.quick if quick else run.full
        print(f"\n## {run.module} {' '.join(args)}".rstrip(), flush=True)
        started = time.monotonic()
        code = subprocess.run([sys.executable, "-m", run.module, *args], env=env, check=False).returncode
        print(f"\n({run.module}: {time.monotonic() - started:.0f} s)", flush=True)
        if code != 0:
            missing[run.module] = f"{run.module} failed (exit {code})"
    return missing


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench")
    parser.add_argument("--quick", action="store_true", default=os.environ.get("BENCH_QUICK", "") not in ("", "0"))
    parser.add_argument("--only", nargs="*", default=[], help="run only these modules (bench.bench_x or bench_x)")
    parser.add_argument("--rows-file", type=Path, default=None, help="keep the table's rows here (JSON lines)")
    ns = parser.parse_args()
    wanted = {m if m.startswith("bench.") else f"bench.{m}" for m in ns.only}
    runs = [r for r in RUNS if not wanted or r.module in wanted]
    with tempfile.TemporaryDirectory() as d:
        rows_file = ns.rows_file or Path(d) / "rows.jsonl"
        rows_file.unlink(missing_ok=True)
        missing = run_all(runs, ns.quick, rows_file)
        skipped = {g.module: f"{g.module} not run (--only)" for g in GOALS if g.module not in {r.module for r in runs}}
        rows = read_rows(rows_file)
    mode = "quick" if ns.quick else "full"
    print(f"\n## Every goal, this run ({mode}; a shared 2-core machine: figures are noisy)\n")
    print(render(rows, GOALS, {**skipped, **missing}))
    if any(why.startswith((f"{module} failed", f"{module} needs")) for module, why in missing.items()):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
