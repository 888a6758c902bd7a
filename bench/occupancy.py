"""Where the machine's cores went while a write phase was saturated: the whole machine, the node, the rest.

A ratio such as committed msgs/s ÷ verify/s says how fast, not what bounds it. `Occupancy` samples, every
`interval` seconds, the machine's busy CPU time (/proc/stat), the node's process tree (its main process,
verify workers and store writer, bench/procstat.py) and the node's main thread alone; `window` keeps the
samples where the node's tree used at least `busy_cores` (the load, not the spawning of load clients or the
drain after it) and sums them:

    with Occupancy(node_pid) as occ:
        write_phase(...)
    w = occ.window()   # seconds, machine / node / other cores, node main thread's share of one core

When the machine is near all its cores, CPU per message is the bound; when it is not and the main thread
is not near one core either, something waits (a pipe, a lock, the load clients' requests in flight).
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from bench.procstat import cpu_seconds, tree_cpu_seconds

TICK = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Sample:
    seconds: float  # wall time the sample covers
    machine: float  # busy CPU seconds of the whole machine (every core) in it
    node: float  # CPU seconds of the node's process tree in it
    main_thread: float  # CPU seconds of the node's main thread in it


@dataclass(frozen=True)
class Window:
    seconds: float  # wall time of the kept samples
    machine_cores: float  # mean busy cores of the machine
    node_cores: float
    other_cores: float  # the machine less the node: load clients, watcher, the rest of the host
    main_thread: float  # mean share of one core the node's main thread used
    cores: int  # the machine's cores

    def describe(self) -> str:
        return (
            f"over the {self.seconds:.1f} s the load ran, the machine was busy {self.machine_cores:.2f} of "
            f"{self.cores} cores: the node {self.node_cores:.2f} (its main thread {self.main_thread:.2f} of one "
            f"core), the load clients and the rest {self.other_cores:.2f}"
        )


def summarize(samples: list[Sample], busy_cores: float, cores: int) -> Window:
    """The samples where the node used at least `busy_cores`, summed (all zeros when there is none)."""
    kept = [s for s in samples if s.seconds > 0 and s.node / s.seconds >= busy_cores]
    seconds = sum(s.seconds for s in kept)
    if not seconds:
        return Window(0.0, 0.0, 0.0, 0.0, 0.0, cores)
    machine = sum(s.machine for s in kept) / seconds
    node = sum(s.node for s in kept) / seconds
    return Window(
        seconds=seconds,
        machine_cores=machine,
        node_cores=node,
        other_cores=max(0.0, machine - node),
        main_thread=sum(s.main_thread for s in kept) / seconds,
        cores=cores,
    )


def machine_busy_seconds() -> float:
    """Busy CPU seconds of every core since boot (/proc/stat: all but idle and iowait)."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(values[:8]) - values[3] - values[4]) / TICK  # user..steal; guest is inside user already


class Occupancy:
    """Samples the machine, the node's tree and its main thread in a background thread (a context manager).
    With several pids (the members of a cluster) "the node" is every one's tree together, and the main thread
    the first one's."""

    def __init__(self, pid: int, *more: int, interval: float = 0.2) -> None:
        self.pid = pid
        self.pids = (pid, *more)
        self.interval = interval
        self.samples: list[Sample] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="occupancy", daemon=True)

    def _read(self) -> tuple[float, float, float, float]:
        node = sum(sum(tree_cpu_seconds(pid).values()) for pid in self.pids)
        return time.perf_counter(), machine_busy_seconds(), node, cpu_seconds(self.pid, tid=self.pid)

    def _run(self) -> None:
        before = self._read()
        while not self._stop.wait(self.interval):
            now = self._read()
            # a process of the tree that ended in between takes its CPU with it: never below zero
            self.samples.append(Sample(*(max(0.0, b - a) for a, b in zip(before, now, strict=True))))
            before = now

    def __enter__(self) -> Occupancy:
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        self._thread.join()

    def window(self, busy_cores: float = 0.5) -> Window:
        return summarize(self.samples, busy_cores, os.cpu_count() or 1)
