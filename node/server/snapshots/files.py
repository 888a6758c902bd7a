"""Durable file steps shared by snapshots and restores: fsync a file, write atomically (a directory's fsync is
node.storage.identity.fsync_dir, which the store's identity file uses too)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from node.storage.identity import DATA_FILE, fsync_dir

STORE_FILE = DATA_FILE  # LMDB's data file; `lock.mdb` (LOCK_FILE) beside it is recreated by LMDB, never copied


def fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
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
