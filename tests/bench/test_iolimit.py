"""bench/iolimit.py: a process tree's writes to a disk held to a cloud volume's limits (cgroup v1 blkio), with
what the group wrote counted by the kernel, and the groups gone afterwards. Needs the blkio controller,
writable, and a block device under the test's directory."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench.cgroups import members
from bench.iolimit import IoLimits, block_device, unavailable

needs_cgroup = pytest.mark.skipif(bool(unavailable()), reason=unavailable() or "cgroup available")
SYNCS = 60
WRITER = f"""
import os, sys
sys.stdin.readline()
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT)
for i in range({SYNCS}):
    os.pwrite(fd, b"x" * 4096, i * 65536)
    os.fdatasync(fd)
"""


def on_disk(tmp_path: Path) -> Path:
    try:
        block_device(tmp_path)
    except RuntimeError as err:
        pytest.skip(str(err))
    return tmp_path


@needs_cgroup
def test_a_confined_tree_is_held_to_its_write_operations_and_counted(tmp_path: Path) -> None:
    where = on_disk(tmp_path)
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(where / "f")], stdin=subprocess.PIPE)
    with IoLimits(iops=40, bps=10**9) as limits:
        group = limits.confine(proc.pid, where)
        device = block_device(where)
        assert (group / "blkio.throttle.write_iops_device").read_text().split() == [device, "40"]
        assert members(group) == [proc.pid]
        began = time.monotonic()
        proc.communicate(b"go\n")
        took = time.monotonic() - began
        written = limits.written(group)
    assert proc.returncode == 0
    assert written.ops >= SYNCS and written.bytes >= SYNCS * 4096  # each sync wrote its page, in the group
    assert took >= (written.ops - 40) / 40  # no faster than the limit allows (a burst of one second's worth)
    assert not group.exists() and not limits.parent.exists()


def test_a_path_off_any_block_device_and_a_machine_without_the_controller_say_why(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="not on a block device"):
        block_device(Path("/dev/shm"))
    assert "no cgroup-v1 blkio controller" in unavailable(tmp_path)
    with pytest.raises(RuntimeError, match="no cgroup-v1 blkio controller"), IoLimits(root=tmp_path):
        pass
    with pytest.raises(ValueError):
        IoLimits(iops=0)
