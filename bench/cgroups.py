"""Groups of a cgroup-v1 controller that a bench makes, confines process trees in, and removes.

`Groups(root, check)` makes a parent group `chain-bench-<pid>` under the controller's `root`; `make(settings)`
adds a group with those control files written; `move(group, pid)` moves a process and its descendants in
(processes they start later are born inside). `close()` moves what is still alive back to the root group and
removes the groups; groups a killed bench left behind (their bench process is gone) are removed on entry.
`Limits` is the context manager bench/cpulimit.py (the `cpu` controller) and bench/iolimit.py (`blkio`) build
on: entered, it checks the controller and opens the parent group; left, it removes every group.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType

from bench.procstat import descendants

PREFIX = "chain-bench-"  # + the pid of the bench process that made the groups


def unavailable(root: Path, control: str, name: str) -> str:
    """Why groups cannot be made under `root`, a `name` controller with the file `control` ("" when they can)."""
    if not (root / control).is_file():
        return f"no cgroup-v1 {name} controller at {root}"
    if not os.access(root, os.W_OK):
        return f"{root} is not writable (the confined runs need root)"
    return ""


def members(group: Path) -> list[int]:
    """The processes in a group now."""
    try:
        return [int(p) for p in (group / "cgroup.procs").read_text().split()]
    except FileNotFoundError:
        return []


class Groups:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.parent = root / f"{PREFIX}{os.getpid()}"
        self.groups: list[Path] = []

    def open(self) -> None:
        for stale in self.root.glob(f"{PREFIX}*"):
            owner = stale.name.removeprefix(PREFIX)
            if owner.isdigit() and not Path(f"/proc/{owner}").exists():
                self._remove(stale, sorted(p for p in stale.iterdir() if p.is_dir()))
        self.parent.mkdir()

    def make(self, settings: Mapping[str, str]) -> Path:
        group = self.parent / f"g{len(self.groups)}"
        group.mkdir()
        self.groups.append(group)
        for name, value in settings.items():
            (group / name).write_text(value)
        return group

    @staticmethod
    def move(group: Path, pid: int) -> None:
        for member in (pid, *descendants(pid)):
            with contextlib.suppress(ProcessLookupError):  # a process that ended meanwhile
                (group / "cgroup.procs").write_text(str(member))

    def close(self) -> None:
        self._remove(self.parent, self.groups)
        self.groups = []

    def _remove(self, parent: Path, groups: list[Path]) -> None:
        for group in groups:
            for pid in members(group):
                with contextlib.suppress(ProcessLookupError):
                    (self.root / "cgroup.procs").write_text(str(pid))
            with contextlib.suppress(FileNotFoundError):
                group.rmdir()
        with contextlib.suppress(FileNotFoundError):
            parent.rmdir()


class Limits:
    """Groups of one controller, as a context manager; a subclass says why its controller is unavailable."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._groups = Groups(root)
        self.parent = self._groups.parent

    def unavailable(self) -> str:
        raise NotImplementedError

    def __enter__(self) -> Limits:
        why = self.unavailable()
        if why:
            raise RuntimeError(why)
        self._groups.open()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        self._groups.close()
