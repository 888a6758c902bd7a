"""Durable file steps shared by snapshots and restores: fsync a file and its directory, write atomically."""

from __future__ import annotations

import os
import time
from pathlib import Path

STORE_FILE = "data.mdb"  # LMDB's data file; `lock.mdb` beside it is recreated by LMDB and never copied
LOCK_FILE = "lock.mdb"


def fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(path: Path) -> None:
    """Make a rename or a new entry in `path` durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, data: bytes) -> None:
    """`path` holds either its old content or all of `data`, never a part of it, even after a crash."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{time.monotonic_ns()}.tmp")  # concurrent writers never share one
    with tmp.open("wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    tmp.replace(path)
    fsync_dir(path.parent)
