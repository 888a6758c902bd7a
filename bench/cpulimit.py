"""A CPU quota per node, so that one 2-core machine can stand in for a machine per cluster member.

`CpuLimits` makes one cgroup (v1 `cpu` controller) per confined group under a parent of its own, gives each a
CFS quota of `cores` cores (`cpu.cfs_quota_us` = cores x `cpu.cfs_period_us`), and moves a process tree into it;
processes the tree starts later are born inside. `close()` moves what is still alive back to the root group and
removes the groups; groups a killed bench left behind (their bench process is gone) are removed on entry.
Only cgroup v1's `cpu` controller is handled (what this project's bench machine mounts,
at /sys/fs/cgroup/cpu); `unavailable()` says why a machine cannot confine (no such controller, not writable),
and the bench then skips the confined rounds and says so.
"""

from __future__ import annotations

from pathlib import Path

from bench import cgroups
from bench.cgroups import PREFIX, members

CPU_ROOT = Path("/sys/fs/cgroup/cpu")
__all__ = ("CPU_ROOT", "PREFIX", "CpuLimits", "members", "unavailable")


def unavailable(root: Path = CPU_ROOT) -> str:
    """Why groups cannot be made under `root` ("" when they can)."""
    return cgroups.unavailable(root, "cpu.cfs_quota_us", "cpu")


class CpuLimits(cgroups.Limits):
    def __init__(self, cores: float, root: Path = CPU_ROOT) -> None:
        if cores <= 0:
            raise ValueError(f"cores must be positive, got {cores}")
        super().__init__(root)
        self.cores = cores

    def unavailable(self) -> str:
        return unavailable(self.root)

    def __enter__(self) -> CpuLimits:
        super().__enter__()
        return self

    def confine(self, pid: int) -> Path:
        """A new group of `cores` cores holding `pid` and its descendants; its path."""
        period = int((self.root / "cpu.cfs_period_us").read_text())
        group = self._groups.make({"cpu.cfs_quota_us": str(max(1000, round(self.cores * period)))})
        self._groups.move(group, pid)
        return group
