"""bench/cpulimit.py: a process tree confined to a CPU quota of its own (the replicated bench's rounds with one
emulated machine per member), and the groups gone afterwards. Needs cgroup v1's cpu controller, writable."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.cpulimit import CPU_ROOT, PREFIX, CpuLimits, members, unavailable

BUSY = "import time\nend = time.time() + 30\nwhile time.time() < end: pass\n"
# a parent that starts a busy child after it was confined, then spins itself
PARENT = (
    "import subprocess, sys, time\n"
    "sys.stdin.readline()\n"
    f"child = subprocess.Popen([sys.executable, '-c', {BUSY!r}])\n"
    "print(child.pid, flush=True)\n"
    f"exec({BUSY!r})\n"
)

needs_cgroup = pytest.mark.skipif(bool(unavailable()), reason=unavailable() or "cgroup available")


@pytest.fixture
def parent() -> Iterator[subprocess.Popen[str]]:
    proc = subprocess.Popen([sys.executable, "-c", PARENT], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    yield proc
    proc.kill()
    proc.wait()


def throttled(group: Path) -> int:
    stat = dict(line.split() for line in (group / "cpu.stat").read_text().splitlines())
    return int(stat["nr_throttled"])


@needs_cgroup
def test_a_confined_tree_is_held_to_its_quota_and_its_later_children_are_born_inside(
    parent: subprocess.Popen[str],
) -> None:
    with CpuLimits(0.2) as limits:
        group = limits.confine(parent.pid)
        period = int((group / "cpu.cfs_period_us").read_text())
        assert int((group / "cpu.cfs_quota_us").read_text()) == round(0.2 * period)
        assert parent.stdin is not None and parent.stdout is not None
        parent.stdin.write("go\n")
        parent.stdin.flush()
        child = int(parent.stdout.readline())
        try:
            assert set(members(group)) == {parent.pid, child}
            deadline = time.monotonic() + 20
            while throttled(group) < 3 and time.monotonic() < deadline:  # two busy processes on 0.2 of a core
                time.sleep(0.1)
            assert throttled(group) >= 3
            limits.close()
            assert not group.exists() and not limits.parent.exists()
            root = {int(p) for p in (CPU_ROOT / "cgroup.procs").read_text().split()}
            assert {parent.pid, child} <= root  # still running, back in the root group
        finally:
            os.kill(child, signal.SIGKILL)  # the fixture ends the parent; its busy child would spin on


@needs_cgroup
def test_groups_of_ended_processes_are_removed_too() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.readline()"], stdin=subprocess.PIPE)
    with CpuLimits(0.5) as limits:
        group = limits.confine(proc.pid)
        assert members(group) == [proc.pid]
        proc.communicate(b"\n")
    assert not group.exists() and not limits.parent.exists()


@needs_cgroup
def test_groups_a_killed_bench_left_are_removed_on_entry() -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    stale = CPU_ROOT / f"{PREFIX}{gone.pid}"
    (stale / "g0").mkdir(parents=True)
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (stale / "g0" / "cgroup.procs").write_text(str(sleeper.pid))
        with CpuLimits(0.5) as limits:
            assert not stale.exists()
            assert limits.parent.exists()
        root = {int(p) for p in (CPU_ROOT / "cgroup.procs").read_text().split()}
        assert sleeper.pid in root
    finally:
        sleeper.kill()
        sleeper.wait()
        for group in (stale / "g0", stale):
            if group.exists():
                group.rmdir()


def test_a_machine_without_the_controller_says_why(tmp_path: Path) -> None:
    assert "no cgroup-v1 cpu controller" in unavailable(tmp_path)
    with pytest.raises(RuntimeError, match="no cgroup-v1 cpu controller"), CpuLimits(0.5, root=tmp_path):
        pass
    with pytest.raises(ValueError):
        CpuLimits(0)
