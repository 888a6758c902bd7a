"""A block's write set: what the leader's execution of a block wrote, for members that apply it instead of
executing the block again (`--verify-blocks root`, docs/replication.md).

    data = encode_write_set(output.writes)        # the leader, once per block, into the log entry
    writes = decode_write_set(number, data)       # a member; InvalidBlock when malformed

What travels is the writes the message handlers made: public state (the keys the state tree commits to) and
the secondary indexes. What a member derives from the block itself is left out: the block and head records,
each message's record, event and activity keys, the chain's stats and the tree root's location
(`apply_write_set` in transition.py writes them as the leader's execution did); so are the tree's nodes,
which a member computes from the changed keys itself and never takes from the wire.

Encoding (version 1), deterministic: one version byte, the entry count, then each entry in strictly
ascending key order as the length of the prefix it shares with the previous key, the rest of the key, and
the value (its length + 1, then its bytes; 0 for a delete); every integer an unsigned LEB128 varint.
Keys of a block share long prefixes (an account's records, a project's), which the shared prefix saves.
A decoder refuses anything else: another version, keys out of order or repeated, a key a handler never
writes, trailing bytes.
"""

from __future__ import annotations

from collections.abc import Mapping

from node.errors import InvalidBlock
from node.storage import schema
from node.storage.varint import put_varint, read_varint

VERSION = 1
# what the handlers write: every prefix below the chain's own records, but the activity indexes (the records
# of each message, derived from the block)
DERIVED_PREFIXES = frozenset({int(schema.Prefix.PROJECT_ACTIVITY), int(schema.Prefix.ACCOUNT_ACTIVITY)})
CHAIN_PREFIX = int(schema.Prefix.BLOCK)


def carried(key: bytes) -> bool:
    """Whether the write set carries a write to `key` (a handler's write, not one derived from the block)."""
    return bool(key) and key[0] < CHAIN_PREFIX and key[0] not in DERIVED_PREFIXES


def encode_write_set(writes: Mapping[bytes, bytes | None]) -> bytes:
    """The carried writes of a block's `writes` (None: a delete), encoded (see the module doc)."""
    chain, derived = CHAIN_PREFIX, DERIVED_PREFIXES
    keys = sorted(k for k in writes if k and k[0] < chain and k[0] not in derived)  # `carried`, inlined
    out = bytearray([VERSION])
    _varint(out, len(keys))
    previous = b""
    for key in keys:
        shared = _shared(previous, key)
        rest = len(key) - shared
        if shared < 0x80 and rest < 0x80:
            out += bytes((shared, rest))
        else:
            _varint(out, shared)
            _varint(out, rest)
        out += key[shared:]
        value = writes[key]
        if value is None:
            out.append(0)
        else:
            _varint(out, len(value) + 1)
            out += value
        previous = key
    return bytes(out)


def decode_write_set(number: int, data: bytes) -> dict[bytes, bytes | None]:
    """The writes a block's write set holds, in key order; InvalidBlock (block `number`) when `data` is not a
    write set this encoding makes. (Every length below 128 is one byte, read inline: this runs per entry.)"""
    if not data or data[0] != VERSION:
        raise _malformed(number, f"version {data[:1].hex() or 'none'}, not {VERSION}")
    end = len(data)
    count, at = _read_varint(number, data, 1)
    writes: dict[bytes, bytes | None] = {}
    previous = b""
    chain, derived = CHAIN_PREFIX, DERIVED_PREFIXES
    try:
        for _ in range(count):
            shared = data[at]
            at += 1
            if shared >= 0x80:
                shared, at = _read_varint(number, data, at - 1)
            rest = data[at]
            at += 1
            if rest >= 0x80:
                rest, at = _read_varint(number, data, at - 1)
            if shared > len(previous) or at + rest > end:
                raise _malformed(number, "an entry runs past its bounds")
            key = previous[:shared] + data[at : at + rest]
            at += rest
            if key <= previous or key[0] >= chain or key[0] in derived:
                raise _malformed(number, f"key {key.hex()} out of order, repeated or not a handler's")
            size = data[at]
            at += 1
            if size >= 0x80:
                size, at = _read_varint(number, data, at - 1)
            if size == 0:
                writes[key] = None
            else:
                if at + size - 1 > end:
                    raise _malformed(number, "a value runs past the end")
                writes[key] = data[at : at + size - 1]
                at += size - 1
            previous = key
    except IndexError:
        raise _malformed(number, "a length runs past the end") from None
    if at != end:
        raise _malformed(number, f"{end - at} bytes after the last entry")
    return writes


def _malformed(number: int, why: str) -> InvalidBlock:
    return InvalidBlock(number, "write set", "a well-formed write set", why)


def _shared(a: bytes, b: bytes) -> int:
    """The length of the prefix `a` and `b` share: their first `n` bytes as big-endian integers, XORed, lose
    their highest set bit at the first byte that differs (all in C)."""
    n = min(len(a), len(b))
    x = int.from_bytes(a[:n], "big") ^ int.from_bytes(b[:n], "big")
    return n if x == 0 else n - 1 - (x.bit_length() - 1) // 8


def _varint(out: bytearray, n: int) -> None:
    if n < 0x80:  # the common case, inline
        out.append(n)
        return
    put_varint(out, n)


def _read_varint(number: int, data: bytes, at: int) -> tuple[int, int]:
    try:
        return read_varint(data, at)
    except ValueError:
        raise _malformed(number, "a length runs past the end") from None
