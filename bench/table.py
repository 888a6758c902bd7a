"""The table of goals: every goal `make bench` reports on, and how a bench module hands in its figure.

A bench module runs as its own process (``python -m bench.bench_x``). When it has measured one of the
goals below it calls ``emit(Row(key, value, detail))``; ``python -m bench`` gives every module the path of
one rows file in ``BENCH_ROWS_FILE`` (JSON lines), reads it back at the end and prints one table, a line
per goal, in the order the goals were set: measure | now (this run) | goal | result. A goal whose module did not run
or did not emit (not merged yet, failed, left out by ``--only``) prints "not measured", so the table always
has every row of the goals.

The goals (threshold, direction, unit) live here, in ``GOALS``, and nowhere else; a module hands in only
the figure it measured and a short note of how (absolute numbers, load size), so two modules cannot
disagree about a goal. Run alone (no ``BENCH_ROWS_FILE``), ``emit`` prints the row on stdout instead.
"""

from __future__ import annotations

import json
import math
import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from enum import StrEnum
from pathlib import Path

ROWS_ENV = "BENCH_ROWS_FILE"


class Bound(StrEnum):
    """Which side of the goal passes."""

    AT_LEAST = "≥"
    AT_MOST = "≤"


@dataclass(frozen=True)
class Goal:
    """One row of the goals table."""

    key: str  # what a module emits
    measure: str  # the goal's wording
    goal: float
    bound: Bound
    unit: str  # "" for a ratio
    module: str  # the bench module that measures it
    issue_now: str  # the figure measured when the goal was set

    def passes(self, value: float) -> bool:
        if math.isnan(value):
            return False
        return value >= self.goal if self.bound is Bound.AT_LEAST else value <= self.goal

    def format(self, value: float) -> str:
        """The figure as the table prints it; with more digits where the rounded text would read as the
        other verdict (0.79968 against "≥ 0.8" is "0.7997", not "0.800")."""
        digits = (3 if self.unit == "" and abs(value) < 1 else 2) if abs(value) < 100 else 0
        text = f"{value:,.{digits}f}"
        while digits < 6 and not math.isnan(value) and self.passes(float(text.replace(",", ""))) != self.passes(value):
            digits += 1
            text = f"{value:,.{digits}f}"
        return f"{text} {self.unit}".rstrip()


@dataclass(frozen=True)
class Row:
    """A measured figure for one goal (``key`` names it), with how it was measured."""

    key: str
    value: float
    detail: str = ""
    smaller_load: bool = False  # measured under a lighter load than the goal states (e.g. --quick): not comparable


# The goals, in the order they were set. GetAccount / GetProject were set as one goal; they are two rows here.
GOALS: tuple[Goal, ...] = (
    Goal(
        "ingest_ratio",
        "committed msgs/s ÷ one-core Ed25519 verify/s (`cryptography`)",
        0.75, Bound.AT_LEAST, "", "bench.bench_node", "0.39-0.45 (2,582 msgs/s)",
    ),
    Goal(
        "cpu_per_message",
        "node CPU per committed message, in Ed25519 verifies",
        2.0, Bound.AT_MOST, "verifies", "bench.bench_node", "3.4-3.8",
    ),
    Goal(
        "get_account_ratio",
        "GetAccount QPS ÷ bare single-process grpc.aio echo",
        1.0, Bound.AT_LEAST, "", "bench.bench_reads", "0.62",
    ),
    Goal(
        "get_project_ratio",
        "GetProject QPS ÷ bare single-process grpc.aio echo",
        1.0, Bound.AT_LEAST, "", "bench.bench_reads", "0.77",
    ),
    Goal(
        "operation_proof_ratio",
        "GetOperationProof QPS ÷ the same echo",
        0.8, Bound.AT_LEAST, "", "bench.bench_reads", "0.56",
    ),
    Goal(
        "rest_ratio",
        "REST GET `/v1/accounts/{addr}` ÷ bare aiohttp serving the same JSON",
        0.35, Bound.AT_LEAST, "", "bench.bench_rest", "0.105",
    ),
    Goal(
        "sse_p99",
        "10,000 SSE clients on one gateway, block commit → client p99",
        250.0, Bound.AT_MOST, "ms", "bench.bench_gateway", "407-516 ms",
    ),
    Goal(
        "replicated_ratio",
        "3 replicated nodes ÷ solo, committed msgs/s",
        0.9, Bound.AT_LEAST, "", "bench.bench_replicated", "0.55",
    ),
    # followers apply the leader's write sets instead of executing the blocks again
    Goal(
        "follower_cpu_ratio",
        "follower CPU per committed message ÷ the leader's, every client on the leader (3 replicated nodes)",
        0.25, Bound.AT_MOST, "", "bench.bench_replicated", "(measure)",
    ),
    # what the log holds per message until compaction: at 2,000 msgs/s and a 30 s compaction interval,
    # 2 KiB a message is 120 MB between compactions, a twentieth of etcd's default 2 GiB quota
    Goal(
        "log_bytes_per_message",
        "etcd log bytes per committed message (block and write set)",
        2048.0, Bound.AT_MOST, "B", "bench.bench_replicated", "(measure)",
    ),
    Goal(
        "start_serving",
        "chain-node start → SERVING, empty store, idle machine",
        2.0, Bound.AT_MOST, "s", "bench.bench_startup", "(measure)",
    ),
    # TLS on every hop costs at most a tenth: each side against the same node in plaintext, in the same run
    Goal(
        "tls_ingest_ratio",
        "committed msgs/s with TLS ÷ the same node in plaintext",
        0.9, Bound.AT_LEAST, "", "bench.bench_tls", "(measure)",
    ),
    Goal(
        "tls_reads_ratio",
        "GetAccount QPS (h2load) over TLS ÷ the same node in plaintext",
        0.9, Bound.AT_LEAST, "", "bench.bench_tls", "(measure)",
    ),
    # a client waiting for its commit under load: p99 at half the saturated rate, in block intervals
    Goal(
        "commit_p99_solo",
        "submit → committed p99 at 50% of the saturated rate, solo, in block intervals",
        3.0, Bound.AT_MOST, "intervals", "bench.bench_commit_latency", "(measure)",
    ),
    Goal(
        "commit_p99_replicated",
        "the same, 3 replicated members and etcd on the same machine",
        3.0, Bound.AT_MOST, "intervals", "bench.bench_commit_latency", "(measure)",
    ),
)  # fmt: skip


def goal_of(key: str, goals: Sequence[Goal] = GOALS) -> Goal:
    for goal in goals:
        if goal.key == key:
            return goal
    raise KeyError(f"no goal {key!r} in bench/table.py GOALS")


def emit(row: Row, goals: Sequence[Goal] = GOALS) -> None:
    """Hand a measured figure to the table (appended to ``$BENCH_ROWS_FILE``), or print it when run alone."""
    goal = goal_of(row.key, goals)  # an unknown key is a bug in the module: fail now, not at the end
    path = os.environ.get(ROWS_ENV)
    if not path:
        print(f"table row: {goal.measure}: {goal.format(row.value)} ({row.detail})", flush=True)
        return
    with open(path, "a", encoding="utf-8") as out:
        out.write(json.dumps(asdict(row)) + "\n")


def read_rows(path: Path) -> dict[str, Row]:
    """The rows handed in, by key (a later row for the same key replaces an earlier one)."""
    rows: dict[str, Row] = {}
    if not path.exists():
        return rows
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            doc = json.loads(line)
            rows[doc["key"]] = Row(
                str(doc["key"]), float(doc["value"]), str(doc.get("detail", "")), bool(doc.get("smaller_load"))
            )
    return rows


def result(goal: Goal, row: Row | None) -> str:
    if row is None:
        return "not measured"
    verdict = "pass" if goal.passes(row.value) else "fail"
    return f"{verdict} (smaller load than the goal's)" if row.smaller_load else verdict


def render(rows: Mapping[str, Row], goals: Iterable[Goal] = GOALS, missing: Mapping[str, str] | None = None) -> str:
    """The markdown table: one line per goal, in order; ``missing`` says why a module gave nothing."""
    lines = [
        "| measure | now (this run) | goal | result | how / figure when the goal was set |",
        "|---|---:|---:|---|---|",
    ]
    for goal in goals:
        row = rows.get(goal.key)
        target = f"{goal.bound} {goal.goal:g} {goal.unit}".rstrip()
        if row is None:
            why = (missing or {}).get(goal.module, f"{goal.module} emitted nothing")
            lines.append(f"| {goal.measure} | - | {target} | not measured | {why}; when set: {goal.issue_now} |")
        else:
            note = f"{row.detail}; when set: {goal.issue_now}" if row.detail else f"when set: {goal.issue_now}"
            lines.append(f"| {goal.measure} | {goal.format(row.value)} | {target} | {result(goal, row)} | {note} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m bench.table ROWS_FILE``: print the table of a rows file (e.g. one kept from a run)."""
    args = list(sys.argv[1:] if argv is None else argv)
    print(render(read_rows(Path(args[0]))))


if __name__ == "__main__":
    main()
