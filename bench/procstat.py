"""CPU time of a process and its descendants, from Linux /proc (for the benchmarks' CPU-per-operation rows)."""

from __future__ import annotations

import os
from pathlib import Path


def cpu_seconds(pid: int, tid: int | None = None) -> float:
    """User + system CPU time one process (or, with `tid`, one of its threads) has used so far (0.0 once it
    is gone)."""
    path = f"/proc/{pid}/stat" if tid is None else f"/proc/{pid}/task/{tid}/stat"
    try:
        fields = Path(path).read_text().rpartition(")")[2].split()
    except (FileNotFoundError, ProcessLookupError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def descendants(pid: int) -> list[int]:
    """The process's children, their children, ... (as listed now)."""
    found: list[int] = []
    todo = [pid]
    while todo:
        current = todo.pop()
        try:
            tasks = list(Path(f"/proc/{current}/task").iterdir())
        except FileNotFoundError:
            continue
        for task in tasks:
            try:
                children = [int(c) for c in (task / "children").read_text().split()]
            except FileNotFoundError:
                continue
            found.extend(children)
            todo.extend(children)
    return found


def tree_cpu_seconds(pid: int) -> dict[int, float]:
    """CPU seconds of the process and of each live descendant, by pid."""
    return {p: cpu_seconds(p) for p in [pid, *descendants(pid)]}


def tree_cpu_delta(before: dict[int, float], after: dict[int, float]) -> float:
    """CPU used between two `tree_cpu_seconds` readings (a process that appeared in between counts whole)."""
    return sum(seconds - before.get(pid, 0.0) for pid, seconds in after.items())
