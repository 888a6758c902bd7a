"""How many verify workers the node can afford: from the CPU and memory it may actually use.

`os.cpu_count()` is the host's core count, not what a container may use: a pod limited to 2 CPUs on a
64-core host would start 63 workers (about 42 MB each, ~2.6 GB against a 2 GiB limit). The CPUs this
process may use are the least of: the CPUs it may run on (`sched_getaffinity`), the cgroup CPU quota
(v2 `cpu.max`, v1 `cpu.cfs_quota_us / cpu.cfs_period_us`, the smallest along the cgroup's ancestors), and
a limit the operator states (`--cpu-limit`, which the chart sets from the pod's `limits.cpu`). Workers are
one per whole CPU beyond the first, no more than the cgroup memory limit leaves room for, at most
`MAX_AUTO_WORKERS`. Read workers (`--read-workers -1`, the default; readers/supervisor.py) are one per whole
CPU (none on fewer than two), at most 4, within what the verify workers leave of the memory limit
(`Resources.after`).

    res = Resources.detect(cpu_limit=2.0)
    verify = verify_worker_count(-1, res)
    readers = read_worker_count(-1, res, verify)     # node/server/readers/supervisor.py
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, replace
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
PROC_CGROUP = Path("/proc/self/cgroup")
MAX_AUTO_WORKERS = 8
MAIN_PROCESS_BYTES = 512 * 1024 * 1024  # the node itself: store map, mempool, pending state, gRPC
WORKER_BYTES = 64 * 1024 * 1024  # one spawned verify worker (~42 MB measured) with headroom
UNLIMITED = 1 << 60  # cgroup v1 reports "no limit" as a number near 2**63


@dataclass(frozen=True)
class Resources:
    cpus: float  # CPUs this process may use
    memory_bytes: int | None  # its memory limit (None: none found)
    source: str  # what bounded `cpus`, for the log line

    @classmethod
    def detect(
        cls,
        cpu_limit: float = 0.0,
        cgroup_root: Path = CGROUP_ROOT,
        proc_cgroup: Path = PROC_CGROUP,
        affinity: int | None = None,
    ) -> Resources:
        """`affinity`: the CPUs this process may run on (default: sched_getaffinity)."""
        bounds = {"affinity": float(affinity if affinity is not None else _affinity())}
        quota = cpu_quota(cgroup_root, proc_cgroup)
        if quota is not None:
            bounds["cgroup quota"] = quota
        if cpu_limit > 0:
            bounds["--cpu-limit"] = cpu_limit
        source = min(bounds, key=lambda k: bounds[k])
        return cls(bounds[source], memory_limit(cgroup_root, proc_cgroup), source)

    def after(self, workers: int) -> Resources:
        """What is left for more processes once `workers` workers run: their memory (WORKER_BYTES each) is
        taken from the limit. The CPUs are not: verify workers are busy under writes, read workers under
        reads, and both may use every CPU."""
        if self.memory_bytes is None or workers <= 0:
            return self
        return replace(self, memory_bytes=max(0, self.memory_bytes - workers * WORKER_BYTES))

    def describe(self) -> str:
        """What bounds it, for the line naming the workers chosen: `2 CPUs by affinity, no memory limit`."""
        memory = "no memory limit" if self.memory_bytes is None else f"memory limit {self.memory_bytes >> 20} MiB"
        return f"{self.cpus:.2g} CPUs by {self.source}, {memory}"


def verify_worker_count(flag: int, res: Resources) -> int:
    """`--verify-workers`: -1 is `auto_workers`, a number is taken as given."""
    return auto_workers(res) if flag < 0 else flag


def auto_workers(res: Resources) -> int:
    """One worker per whole CPU beyond the first, within the memory limit and MAX_AUTO_WORKERS."""
    return max(0, min(whole_cpus(res) - 1, workers_in_memory(res), MAX_AUTO_WORKERS))


def whole_cpus(res: Resources) -> int:
    return math.floor(res.cpus + 1e-9)


def workers_in_memory(res: Resources) -> int:
    """Workers (WORKER_BYTES each) the memory limit has room for beside the main process; MAX_AUTO_WORKERS
    without a limit."""
    if res.memory_bytes is None:
        return MAX_AUTO_WORKERS
    return max(0, (res.memory_bytes - MAIN_PROCESS_BYTES) // WORKER_BYTES)


def _affinity() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        return os.cpu_count() or 1


def _cgroups(proc_cgroup: Path) -> list[tuple[list[str], str]]:
    """(controllers, path) per line of /proc/self/cgroup; v2's unified line has controllers [""]."""
    try:
        text = proc_cgroup.read_text()
    except OSError:
        return []
    out = []
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3:
            out.append((parts[1].split(","), parts[2].strip().lstrip("/")))
    return out


def _dirs(base: Path, rel: str) -> list[Path]:
    """The cgroup directory of `rel` under `base` and its ancestors up to `base`, those that exist."""
    parts = [p for p in rel.split("/") if p]
    dirs = [base.joinpath(*parts[:n]) for n in range(len(parts), -1, -1)]
    return [d for d in dirs if d.is_dir()]


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _v1_bases(root: Path, controller: str, controllers: list[str]) -> list[Path]:
    names = dict.fromkeys([",".join(controllers), controller])  # "cpu,cpuacct" or "cpu" (a symlink to it)
    return [root / n for n in names if (root / n).is_dir()]


def cpu_quota(cgroup_root: Path = CGROUP_ROOT, proc_cgroup: Path = PROC_CGROUP) -> float | None:
    """CPUs the cgroup CPU quota allows (the smallest along the ancestors); None when there is none."""
    found: list[float] = []
    for controllers, rel in _cgroups(proc_cgroup):
        if controllers == [""]:  # cgroup v2
            for d in _dirs(cgroup_root, rel):
                fields = (_read(d / "cpu.max") or "max").split()
                if fields[0] != "max" and len(fields) == 2 and int(fields[1]) > 0:
                    found.append(int(fields[0]) / int(fields[1]))
        elif "cpu" in controllers:  # cgroup v1
            for base in _v1_bases(cgroup_root, "cpu", controllers):
                for d in _dirs(base, rel):
                    quota, period = _read(d / "cpu.cfs_quota_us"), _read(d / "cpu.cfs_period_us")
                    if quota and period and int(quota) > 0 and int(period) > 0:
                        found.append(int(quota) / int(period))
    return min(found) if found else None


def memory_limit(cgroup_root: Path = CGROUP_ROOT, proc_cgroup: Path = PROC_CGROUP) -> int | None:
    """The cgroup memory limit in bytes (the smallest along the ancestors); None when there is none."""
    found: list[int] = []
    for controllers, rel in _cgroups(proc_cgroup):
        if controllers == [""]:
            for d in _dirs(cgroup_root, rel):
                raw = _read(d / "memory.max")
                if raw and raw.isdigit():
                    found.append(int(raw))
        elif "memory" in controllers:
            for base in _v1_bases(cgroup_root, "memory", controllers):
                for d in _dirs(base, rel):
                    raw = _read(d / "memory.limit_in_bytes")
                    if raw and raw.isdigit() and int(raw) < UNLIMITED:
                        found.append(int(raw))
    return min(found) if found else None
