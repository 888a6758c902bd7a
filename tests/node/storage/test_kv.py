"""The key-value views: the memo of a fixed snapshot's reads (`MemoView`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import pytest

from node.errors import DataCorrupted
from node.storage.kv import DictView, MemoView, Overlay


class CountingView(DictView):
    """A DictView that counts its reads, and refuses one key as damaged."""

    def __init__(self, items: dict[bytes, bytes], damaged: bytes = b"") -> None:
        super().__init__(items)
        self.gets: Counter[bytes] = Counter()
        self.scans = 0
        self.damaged = damaged

    def get(self, key: bytes) -> bytes | None:
        self.gets[key] += 1
        if key == self.damaged:
            raise DataCorrupted("a damaged record")
        return super().get(key)

    def scan(self, prefix: bytes, start: bytes | None = None, reverse: bool = False) -> Iterator[tuple[bytes, bytes]]:
        self.scans += 1
        return super().scan(prefix, start, reverse)


def test_memo_reads_each_key_of_the_base_once_absent_keys_too() -> None:
    base = CountingView({b"a1": b"x", b"a2": b"y"})
    memo = MemoView(base)
    assert [memo.get(k) for k in (b"a1", b"zz", b"a1", b"zz", b"a2")] == [b"x", None, b"x", None, b"y"]
    assert base.gets == Counter({b"a1": 1, b"zz": 1, b"a2": 1})


def test_memo_passes_scans_through_and_never_remembers_a_failed_read() -> None:
    base = CountingView({b"a1": b"x", b"a2": b"y", b"b1": b"z"}, damaged=b"bad")
    memo = MemoView(base)
    assert list(memo.scan(b"a")) == [(b"a1", b"x"), (b"a2", b"y")]
    assert list(memo.scan(b"a", reverse=True)) == [(b"a2", b"y"), (b"a1", b"x")]
    assert base.scans == 2
    for _ in range(2):  # the damage is found again on every read, not answered from memory
        with pytest.raises(DataCorrupted):
            memo.get(b"bad")
    assert base.gets[b"bad"] == 2


def test_an_overlay_over_the_memo_still_sees_its_own_writes_first() -> None:
    base = CountingView({b"k": b"old"})
    overlay = Overlay(MemoView(base))
    assert overlay.get(b"k") == b"old"
    overlay.put(b"k", b"new")
    assert overlay.get(b"k") == b"new"
    overlay.delete(b"k")
    assert overlay.get(b"k") is None
    child = overlay.child()
    assert child.get(b"k") is None and child.get(b"k2") is None
    assert base.gets == Counter({b"k": 1, b"k2": 1})
