"""The byte-bounded memo both memos use (node/memo.py): kept within its bound, the oldest first, a key
put again replaced in place, an entry over a sixty-fourth of the bound refused, 0 keeping nothing."""

from __future__ import annotations

from node.memo import BoundedMemo


def test_kept_within_its_bytes_oldest_first() -> None:
    memo: BoundedMemo[int, str] = BoundedMemo(64 * 100)  # entries up to 100 bytes
    for n in range(1000):
        memo.put(n, f"v{n}", 30)
        assert memo.size <= memo.max_bytes and memo.size == 30 * len(memo)
    assert len(memo) == 64 * 100 // 30
    assert memo.get(999) == "v999" and memo.get(1000 - len(memo)) is not None  # the newest are kept
    assert memo.get(999 - len(memo)) is None and memo.get(0) is None  # the oldest went first


def test_a_key_put_again_is_replaced_and_counted_once() -> None:
    memo: BoundedMemo[str, str] = BoundedMemo(6400)
    memo.put("a", "old", 50)
    memo.put("b", "b", 50)
    memo.put("a", "new", 80)
    assert (memo.get("a"), memo.size, len(memo)) == ("new", 130, 2)
    # the replaced key is now the newest: filling the memo drops "b" before it
    for n in range(6400 // 100 - 1):
        memo.put(f"k{n}", "x", 100)
    assert memo.get("b") is None and memo.get("a") == "new" and memo.size <= memo.max_bytes


def test_an_entry_over_a_sixty_fourth_is_not_kept_and_0_keeps_nothing() -> None:
    memo: BoundedMemo[str, str] = BoundedMemo(6400)
    memo.put("small", "s", 100)
    memo.put("big", "b", 101)  # over a sixty-fourth: refused, and nothing is dropped to make room for it
    assert (memo.get("small"), memo.get("big"), memo.size) == ("s", None, 100)
    off: BoundedMemo[str, str] = BoundedMemo(0)
    off.put("k", "v", 1)
    assert (len(off), off.size, off.get("k")) == (0, 0, None)
    assert BoundedMemo[str, str](-5).max_bytes == 0
