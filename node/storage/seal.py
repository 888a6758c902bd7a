"""The clean-stop seal: what lets a start skip the page walk of a store nobody has written since it was closed.

The start-up walk (node/storage/lmdb_file.py) reads every page of the file before LMDB maps it, and takes
time in proportion to the store. It guards against a file changed behind the node's back: cut short,
overwritten, mixed with another. A store this node closed cleanly, and that nobody has written since, needs
none of that: its pages are the ones LMDB last wrote and the walk before them already passed.

So a node that closes its store cleanly writes `store-seal.json` beside it: the data file's device, inode,
size, modification and change times (nanoseconds), and LMDB's newest transaction id. At the next start,
`check_files` compares the seal with the file as it is: when every field is equal, only the meta pages and
the file's length are checked (still before anything maps it); when any differs, or there is no seal (a
kill -9, a power cut, an OOM kill, a copied or restored file), the whole walk runs. The seal is removed
before the store is opened for writing, so a process that dies while it holds the store never leaves one.

Why these fields: any write to the file through the kernel moves its change time, which no user call can set
back (`os.utime` sets the modification time and moves the change time again); a replaced file has another
inode; a truncation changes the size. Damage that bypasses the kernel (the disk's own bit rot under a
stopped node) is outside what the walk could prove anyway: the records read while serving are checked
(blocks and tree nodes by hash, LMDB's own page checks), and `chain-node verify-store` reads every node.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Final

from node.storage.identity import DATA_FILE, fsync_dir

SEAL_FILE: Final = "store-seal.json"
CLOCK_TICK_NS: Final = 20_000_000  # more than one tick of the kernel's coarse clock (4 ms at HZ=250, 10 at 100)


@dataclass(frozen=True)
class Seal:
    dev: int
    ino: int
    size: int
    mtime_ns: int
    ctime_ns: int
    txnid: int

    @classmethod
    def of(cls, data: Path, txnid: int) -> Seal:
        st = os.stat(data)
        return cls(st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, txnid)


def write_seal(data_dir: Path, txnid: int) -> bool:
    """After a clean close: the seal of the data file as it is now (written whole, or not at all). The kernel
    stamps change times from a clock that ticks every few milliseconds, so a write in the same tick as the
    last one would keep the same change time: the seal is written once that clock has moved on and the file
    is still as it was (False: it changed meanwhile, no seal)."""
    data = data_dir / DATA_FILE
    seal = Seal.of(data, txnid)
    wait = (seal.ctime_ns + CLOCK_TICK_NS - time.time_ns()) / 1e9
    if wait > 0:
        time.sleep(wait)
    if Seal.of(data, txnid) != seal:
        return False
    tmp = data_dir / (SEAL_FILE + ".tmp")
    with open(tmp, "w") as f:
        json.dump(asdict(seal), f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, data_dir / SEAL_FILE)
    fsync_dir(data_dir)
    return True


def read_seal(data_dir: Path) -> Seal | None:
    """The seal, or None when there is none or it does not read as one (then the walk runs)."""
    try:
        fields = json.loads((data_dir / SEAL_FILE).read_text())
        return Seal(**{name: int(fields[name]) for name in Seal.__dataclass_fields__})
    except (OSError, ValueError, KeyError, TypeError):
        return None


def is_sealed(data_dir: Path, txnid: int) -> bool:
    """Whether the data file is exactly as a clean close left it (`txnid`: LMDB's newest, read from the file)."""
    seal = read_seal(data_dir)
    try:
        return seal is not None and seal == Seal.of(data_dir / DATA_FILE, txnid)
    except OSError:
        return False


def break_seal(data_dir: Path) -> None:
    """Before the store is opened for writing: from now on only a clean close says it is sound."""
    try:
        os.unlink(data_dir / SEAL_FILE)
    except FileNotFoundError:
        return
    fsync_dir(data_dir)
