"""A cloud volume's write limits for a process tree, as bench/cpulimit.py gives it a machine's cores.

A pod's volume is not the bench machine's disk: a cloud block volume's baseline is a number of write
operations and bytes per second (3,000 IOPS and 125 MB/s for a general-purpose SSD volume). `IoLimits`
makes a cgroup (v1 `blkio` controller) per confined tree with `blkio.throttle.write_iops_device` and
`blkio.throttle.write_bps_device` set for the block device under a path, moves the tree in, and reads back
what the group wrote to that device (`written`: bytes and operations, from `blkio.throttle.io_service_bytes`
and `io_serviced`). The node's store writer syncs each commit itself, so the writes its syncs send are
issued in its own context and held to the group's limits; cgroup v1 does not charge the kernel's background
writeback to the group (pages written back before a sync are neither limited nor counted here).

Only cgroup v1's `blkio` controller is handled (this project's bench machine mounts it at
/sys/fs/cgroup/blkio); `unavailable()` says why a machine cannot confine, and the bench then says so.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from bench import cgroups

BLKIO_ROOT = Path("/sys/fs/cgroup/blkio")
CLOUD_IOPS = 3_000  # a general-purpose cloud SSD volume's baseline write operations per second
CLOUD_BPS = 125_000_000  # ... and its baseline throughput, bytes per second


def unavailable(root: Path = BLKIO_ROOT) -> str:
    """Why groups cannot be made under `root` ("" when they can)."""
    return cgroups.unavailable(root, "blkio.throttle.write_iops_device", "blkio")


def block_device(path: Path) -> str:
    """`major:minor` of the whole disk holding `path` (a partition's disk: throttles apply to disks)."""
    st = os.stat(path)
    dev = f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}"
    sysfs = Path("/sys/dev/block") / dev
    if not sysfs.exists():
        raise RuntimeError(f"{path} is not on a block device ({dev}: a tmpfs or overlay cannot be throttled)")
    if (sysfs / "partition").exists():
        return (sysfs.resolve().parent / "dev").read_text().strip()
    return dev


@dataclass(frozen=True)
class Written:
    bytes: int
    ops: int


class IoLimits(cgroups.Limits):
    def __init__(self, iops: int = CLOUD_IOPS, bps: int = CLOUD_BPS, root: Path = BLKIO_ROOT) -> None:
        if iops <= 0 or bps <= 0:
            raise ValueError(f"limits must be positive, got {iops} IOPS and {bps} B/s")
        super().__init__(root)
        self.iops, self.bps = iops, bps
        self._device: dict[Path, str] = {}

    def unavailable(self) -> str:
        return unavailable(self.root)

    def __enter__(self) -> IoLimits:
        super().__enter__()
        return self

    def confine(self, pid: int, path: Path) -> Path:
        """A new group holding `pid` and its descendants, its writes to `path`'s disk held to the limits."""
        device = block_device(path)
        group = self._groups.make(
            {
                "blkio.throttle.write_iops_device": f"{device} {self.iops}",
                "blkio.throttle.write_bps_device": f"{device} {self.bps}",
            }
        )
        self._device[group] = device
        self._groups.move(group, pid)
        return group

    def written(self, group: Path) -> Written:
        """What the group has written to its device so far."""
        device = self._device[group]
        return Written(
            _count(group / "blkio.throttle.io_service_bytes", device),
            _count(group / "blkio.throttle.io_serviced", device),
        )


def _count(path: Path, device: str) -> int:
    for line in path.read_text().splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] == device and parts[1] == "Write":
            return int(parts[2])
    return 0
