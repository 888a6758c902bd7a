"""The clean-stop seal (node/storage/seal.py): a store closed cleanly starts without the page walk, and
anything else (a kill, a write to the file since, a replaced file) gets the walk and its refusals."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from node.chain import Chain
from node.errors import StoreRefused
from node.storage import integrity, lmdb_file
from node.storage.lmdb_file import read_meta, walk
from node.storage.seal import SEAL_FILE, is_sealed, read_seal
from tests.fixtures.stores import closed_store


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return closed_store(tmp_path / "chain")


@pytest.fixture
def walks(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The files the start-up checks walk page by page."""
    walked: list[Path] = []
    real = lmdb_file.walk

    def counted(path: Path, *args: object, **kwargs: object) -> object:
        walked.append(path)
        return real(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(integrity, "walk", counted)  # the name the start-up checks call
    return walked


def test_a_clean_close_seals_and_the_next_open_skips_the_walk(store: Path, walks: list[Path]) -> None:
    seal = read_seal(store)
    assert seal is not None and is_sealed(store, read_meta(store / "data.mdb").txnid)
    chain = Chain.open(store)
    assert walks == []  # only the meta pages and the length were read
    assert not (store / SEAL_FILE).exists()  # open for writing: no seal until it closes cleanly again
    chain.close()
    assert read_seal(store) is not None
    Chain.open(store).close()
    assert walks == []


KILLED = """
import os, sys
from node.chain import Chain
chain = Chain.open(sys.argv[1])
print("open", flush=True)
sys.stdin.read()
"""


def test_a_store_whose_process_was_killed_is_walked(store: Path, walks: list[Path]) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", KILLED, str(store)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=Path.cwd()
    )
    assert proc.stdout is not None and proc.stdout.readline() == b"open\n"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert read_seal(store) is None
    Chain.open(store).close()
    assert walks == [store / "data.mdb"]


def test_a_page_damaged_after_a_clean_close_is_refused_even_with_its_mtime_put_back(store: Path) -> None:
    """Every field the seal compares would still match but the change time, which no user call sets back:
    the test fails when the seal ignores it."""
    data = store / "data.mdb"
    meta = read_meta(data)
    pages = [p for p, hit in enumerate(walk(data, meta).seen) if hit and p > 1]
    before = os.stat(data)
    with open(data, "r+b") as f:  # the same file, the same size, the meta pages untouched
        page = random.Random(3).choice(pages)
        f.seek(page * meta.page_size)
        f.write(random.Random(4).randbytes(meta.page_size))
    os.utime(data, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert os.stat(data).st_mtime_ns == before.st_mtime_ns and os.stat(data).st_size == before.st_size
    with pytest.raises(StoreRefused, match="damaged"):
        Chain.open(store)


def test_a_seal_of_another_file_is_not_this_files(store: Path, walks: list[Path]) -> None:
    data = store / "data.mdb"
    copy = store / "data.copy"
    copy.write_bytes(data.read_bytes())
    os.replace(copy, data)  # the same bytes in a new inode: a restored or copied file
    Chain.open(store).close()
    assert walks == [data]


def test_an_unreadable_seal_means_a_walk(store: Path, walks: list[Path]) -> None:
    (store / SEAL_FILE).write_text("{not json")
    Chain.open(store).close()
    assert walks == [store / "data.mdb"]


def test_a_store_that_met_damage_while_open_is_not_sealed(store: Path) -> None:
    """A fault latched while serving: the close leaves no seal, so the next start walks every page."""
    chain = Chain.open(store)
    chain.store.fault.record("a test's damage")
    chain.close()
    assert read_seal(store) is None
