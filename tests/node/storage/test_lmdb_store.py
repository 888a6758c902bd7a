"""The store's record check (node/storage/lmdb_store.py) on a real LMDB file: it runs on the records whose keys
it names (`checked`), on a get and on every scan that can reach them, and on no other record."""

from __future__ import annotations

from pathlib import Path

import pytest

from node.errors import DataCorrupted
from node.storage.lmdb_store import LmdbStore

CHECKED = b"\x05"  # the check's keys: the records under this prefix
BAD = b"bad"  # a value the check refuses


@pytest.fixture
def checks(tmp_path: Path) -> tuple[LmdbStore, list[bytes]]:
    """A store whose check refuses BAD and notes every key it looked at; BAD is stored under every prefix."""
    seen: list[bytes] = []

    def check(key: bytes, value: bytes) -> str | None:
        seen.append(key)
        return "damaged" if value == BAD else None

    store = LmdbStore(tmp_path / "store", sync=False, check=check, checked=(CHECKED,))
    store.commit({CHECKED + b"a": b"good", CHECKED + b"b": BAD, b"\x06a": BAD, b"\x07a": BAD}, {})
    return store, seen


def test_a_get_is_checked_only_under_the_checked_keys(checks: tuple[LmdbStore, list[bytes]]) -> None:
    store, seen = checks
    with store.read() as (view, _):
        assert view.get(b"\x06a") == BAD  # not a checked key: handed out unread
        assert view.get(CHECKED + b"a") == b"good"
        assert seen == [CHECKED + b"a"]
        with pytest.raises(DataCorrupted, match="damaged"):
            view.get(CHECKED + b"b")
    store.close()


@pytest.mark.parametrize("prefix", [CHECKED, CHECKED + b"b", b""])
def test_a_scan_that_reaches_the_checked_keys_checks_them(checks: tuple[LmdbStore, list[bytes]], prefix: bytes) -> None:
    store, _ = checks
    with store.read() as (view, _), pytest.raises(DataCorrupted, match="damaged"):  # within, or over them
        list(view.scan(prefix))
    store.close()


def test_a_scan_beside_the_checked_keys_checks_nothing(checks: tuple[LmdbStore, list[bytes]]) -> None:
    store, seen = checks
    with store.read() as (view, _):
        assert list(view.scan(b"\x06")) == [(b"\x06a", BAD)]
        assert list(view.scan(b"\x07", reverse=True)) == [(b"\x07a", BAD)]
    assert seen == []
    store.close()


def test_without_checked_keys_every_record_is_checked(tmp_path: Path) -> None:
    seen: list[bytes] = []
    store = LmdbStore(tmp_path / "store", sync=False, check=lambda key, _value: seen.append(key))
    store.commit({b"\x06a": b"x", b"\x07a": b"y"}, {})
    with store.read() as (view, _):
        view.get(b"\x06a")
        list(view.scan(b"\x07"))
    assert seen == [b"\x06a", b"\x07a"]
    store.close()
