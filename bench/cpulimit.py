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

import contextlib
import os
from pathlib import Path
from types import TracebackType

from bench.procstat import descendants

CPU_ROOT = Path("/sys/fs/cgroup/cpu")
PREFIX = "chain-bench-"  # + the pid of the bench process that made the groups


def unavailable(root: Path = CPU_ROOT) -> str:
    """Why groups cannot be made under `root` ("" when they can)."""
    if not (root / "cpu.cfs_quota_us").is_file():
        return f"no cgroup-v1 cpu controller at {root}"
    if not os.access(root, os.W_OK):
        return f"{root} is not writable (the confined rounds need root)"
    return ""


class CpuLimits:
    def __init__(self, cores: float, root: Path = CPU_ROOT) -> None:
        if cores <= 0:
            raise ValueError(f"cores must be positive, got {cores}")
        self.cores = cores
        self.root = root
        self.parent = root / f"{PREFIX}{os.getpid()}"
        self._groups: list[Path] = []

    def __enter__(self) -> CpuLimits:
        why = unavailable(self.root)
        if why:
            raise RuntimeError(why)
        for stale in self.root.glob(f"{PREFIX}*"):
            owner = stale.name.removeprefix(PREFIX)
            if owner.isdigit() and not Path(f"/proc/{owner}").exists():
                self._remove(stale, sorted(p for p in stale.iterdir() if p.is_dir()))
        self.parent.mkdir()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def confine(self, pid: int) -> Path:
        """A new group of `cores` cores holding `pid` and its descendants; its path."""
        group = self.parent / f"g{len(self._groups)}"
        group.mkdir()
        self._groups.append(group)
        period = int((group / "cpu.cfs_period_us").read_text())
        (group / "cpu.cfs_quota_us").write_text(str(max(1000, round(self.cores * period))))
        for member in (pid, *descendants(pid)):
            with contextlib.suppress(ProcessLookupError):  # a process that ended meanwhile
                (group / "cgroup.procs").write_text(str(member))
        return group

    def close(self) -> None:
        self._remove(self.parent, self._groups)
        self._groups = []

    def _remove(self, parent: Path, groups: list[Path]) -> None:
        for group in groups:
            for pid in members(group):
                with contextlib.suppress(ProcessLookupError):
                    (self.root / "cgroup.procs").write_text(str(pid))
            with contextlib.suppress(FileNotFoundError):
                group.rmdir()
        with contextlib.suppress(FileNotFoundError):
            parent.rmdir()


def members(group: Path) -> list[int]:
    """The processes in a group now."""
    try:
        return [int(p) for p in (group / "cgroup.procs").read_text().split()]
    except FileNotFoundError:
        return []
