"""Key-value views: the read protocol every layer shares, and the overlay.

An `Overlay` buffers writes over a base view. The state transition runs each
message on a child overlay of the block's overlay, so a rejected message is
discarded whole and an accepted one is folded into its parent; the block's
overlay is finally written to LMDB in one transaction.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator, Mapping
from typing import Protocol


class ReadView(Protocol):
    def get(self, key: bytes) -> bytes | None: ...

    def scan(self, prefix: bytes, start: bytes | None = None, reverse: bool = False) -> Iterator[tuple[bytes, bytes]]:
        """Items whose key starts with `prefix`, in key order (descending when
        `reverse`), beginning at `start` (inclusive) when given."""
        ...


def prefix_end(prefix: bytes) -> bytes | None:
    """Smallest key greater than every key starting with `prefix` (None: no bound)."""
    stripped = prefix.rstrip(b"\xff")
    if not stripped:
        return None
    return stripped[:-1] + bytes([stripped[-1] + 1])


def in_range(key: bytes, prefix: bytes, start: bytes | None, reverse: bool) -> bool:
    if not key.startswith(prefix):
        return False
    if start is None:
        return True
    return key <= start if reverse else key >= start


class DictView:
    """An in-memory ReadView (tests and empty bases)."""

    def __init__(self, items: Mapping[bytes, bytes] | None = None) -> None:
        self._items = dict(items or {})

    def get(self, key: bytes) -> bytes | None:
        return self._items.get(key)

    def scan(self, prefix: bytes, start: bytes | None = None, reverse: bool = False) -> Iterator[tuple[bytes, bytes]]:
        keys = sorted((k for k in self._items if in_range(k, prefix, start, reverse)), reverse=reverse)
        for k in keys:
            yield k, self._items[k]


class MemoView:
    """A view of one fixed snapshot that remembers what each `get` answered (absent keys too).

    A block's messages read the same few records again and again (the signer's account, its delegated
    key, its storage grants): over a snapshot that cannot change under it (an LMDB read transaction) the
    second read is a dict lookup. Scans and failed reads are passed through, never remembered."""

    def __init__(self, base: ReadView) -> None:
        self._base = base
        self._got: dict[bytes, bytes | None] = {}

    def get(self, key: bytes) -> bytes | None:
        try:
            return self._got[key]
        except KeyError:
            value = self._got[key] = self._base.get(key)
            return value

    def scan(self, prefix: bytes, start: bytes | None = None, reverse: bool = False) -> Iterator[tuple[bytes, bytes]]:
        return self._base.scan(prefix, start, reverse)


class Overlay:
    """Buffered writes (None = delete) over a base view."""

    def __init__(self, base: ReadView) -> None:
        self._base = base
        self._writes: dict[bytes, bytes | None] = {}

    @property
    def writes(self) -> Mapping[bytes, bytes | None]:
        return self._writes

    def get(self, key: bytes) -> bytes | None:
        if key in self._writes:
            return self._writes[key]
        return self._base.get(key)

    def put(self, key: bytes, value: bytes) -> None:
        self._writes[key] = value

    def delete(self, key: bytes) -> None:
        self._writes[key] = None

    def rebase(self, base: ReadView) -> Overlay:
        """The same writes over another base (after the base absorbed a prefix of them)."""
        moved = Overlay(base)
        moved._writes = self._writes
        self._writes = {}
        return moved

    def child(self) -> Overlay:
        return Overlay(self)

    def copy(self) -> Overlay:
        """Another overlay with the same base and a copy of these writes (each then changes alone)."""
        twin = Overlay(self._base)
        twin._writes = dict(self._writes)
        return twin

    def update(self, writes: Mapping[bytes, bytes | None]) -> None:
        """Take `writes` over as this overlay's own (later ones win)."""
        self._writes.update(writes)

    def fold_into(self, parent: Overlay) -> None:
        """Apply this overlay's writes to `parent` (which must be its base)."""
        if parent is not self._base:
            raise ValueError("fold_into: parent is not this overlay's base")
        parent._writes.update(self._writes)

    def scan(self, prefix: bytes, start: bytes | None = None, reverse: bool = False) -> Iterator[tuple[bytes, bytes]]:
        mine = sorted(
            ((k, v) for k, v in self._writes.items() if in_range(k, prefix, start, reverse)),
            key=lambda kv: kv[0],
            reverse=reverse,
        )
        base = ((k, v) for k, v in self._base.scan(prefix, start, reverse) if k not in self._writes)
        # both sources are ordered; tag overlay items so they win (they never collide after the filter)
        merged = heapq.merge(mine, base, key=lambda kv: kv[0], reverse=reverse)
        for k, v in merged:
            if v is not None:
                yield k, v
