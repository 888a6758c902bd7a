"""Unsigned LEB128 varints (protobuf's), for the encodings the store builds by hand: a block's write set
(node/state/writeset.py) and a format-3 block put back together from its events (node/storage/chainlog.py)."""

from __future__ import annotations


def put_varint(out: bytearray, n: int) -> None:
    """Append `n` (>= 0) to `out`."""
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def read_varint(data: bytes, at: int) -> tuple[int, int]:
    """The varint at `at` and the position after it; ValueError when it runs past the end (or past 64 bits)."""
    n = shift = 0
    while True:
        if at >= len(data) or shift > 63:
            raise ValueError("a varint runs past the end")
        byte = data[at]
        at += 1
        n |= (byte & 0x7F) << shift
        if byte < 0x80:
            return n, at
        shift += 7
