"""A store writer child over a fresh store, for the benches' /proc readings."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from node.storage.lmdb_store import LmdbStore
from node.storage.writer import WriterProcess


@pytest.fixture
def writer(tmp_path: Path) -> Iterator[WriterProcess]:
    """A writer child that has started and opened the store in `tmp_path` (one block committed); closed
    after the test."""
    LmdbStore(tmp_path, sync=False).close()  # the environment and its databases exist
    child = WriterProcess(tmp_path, sync=False)
    try:
        child.commit({b"k": b"v"}, {})
        yield child
    finally:
        child.close()
