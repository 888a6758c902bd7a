"""LMDB's on-disk format read with plain file I/O, before anything maps the file.

LMDB maps `data.mdb` and trusts every page number it finds in it: a file cut short (or a page number
pointing past its end) makes the process die of SIGBUS on the first touch, and a page overwritten with
garbage can send LMDB's B-tree search anywhere. So before `lmdb.open` the node reads the file the slow,
safe way (`os.pread`, which returns short reads instead of faulting):

- the two meta pages (pages 0 and 1): magic, format version, page size, last used page and the roots of
  the free-page and main databases; LMDB itself refuses a file whose either meta page is invalid, and
  uses the one with the higher transaction id;
- the file is at least `(last_pg + 1) * page_size` bytes long;
- every page reachable from the newest meta (the free list, the main database, every named database):
  its header names its own page number, it is a branch or a leaf as its depth requires, its node offsets
  and sizes stay inside the page, every child and overflow page number is inside the file, and no page is
  reached twice. `shallow` named databases (content-addressed ones whose values are checked on every
  read) get only the header check on their leaves, which keeps the start-up walk to a few reads per page.

Layout facts used here are those of LMDB 0.9 on a 64-bit build (`pgno_t`, `size_t` = 8 bytes).
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass, field
from pathlib import Path

MAGIC = 0xBEEFC0DE
DATA_VERSION = 1
PAGE_HEADER = 16  # pgno u64, pad u16, flags u16, lower u16 / upper u16 (or overflow page count u32)
NODE_HEADER = 8  # lo u16, hi u16, flags u16, ksize u16
DB_RECORD = 48  # pad u32, flags u16, depth u16, branch/leaf/overflow pages, entries, root: u64 each
P_BRANCH, P_LEAF, P_OVERFLOW, P_META, P_LEAF2 = 0x01, 0x02, 0x04, 0x08, 0x20
F_BIGDATA, F_SUBDATA, F_DUPDATA = 0x01, 0x02, 0x04
P_INVALID = 0xFFFF_FFFF_FFFF_FFFF
MAX_KEY = 511
FREE_DBI, MAIN_DBI = 0, 1

_HEADER = struct.Struct("<QHHHH")
_META = struct.Struct("<IIQQ")
_DB = struct.Struct("<IHHQQQQQ")
_NODE = struct.Struct("<HHHH")


class LmdbFileDamaged(Exception):
    """The file is not a sound LMDB environment; the message names the first problem found."""


@dataclass(frozen=True)
class DbRecord:
    flags: int
    depth: int
    branch_pages: int
    leaf_pages: int
    overflow_pages: int
    entries: int
    root: int

    @classmethod
    def parse(cls, raw: bytes) -> tuple[int, DbRecord]:
        """(the record's pad field, the record): the free list's pad holds the page size."""
        pad, flags, depth, branch, leaf, overflow, entries, root = _DB.unpack(raw)
        return pad, cls(flags, depth, branch, leaf, overflow, entries, root)


@dataclass(frozen=True)
class Meta:
    page_size: int
    last_pg: int
    txnid: int
    free: DbRecord
    main: DbRecord

    @property
    def needed_bytes(self) -> int:
        return (self.last_pg + 1) * self.page_size


@dataclass
class WalkStats:
    """What a walk visited, per database name (b"" = main, b"\\x00free" = the free list)."""

    pages: int = 0
    entries: dict[bytes, int] = field(default_factory=dict)
    seen: bytearray = field(default_factory=bytearray)
    """One byte per page of the file: 1 where the walk reached it."""


def _parse_meta(raw: bytes, index: int) -> tuple[int, Meta]:
    if len(raw) < PAGE_HEADER + _META.size + 2 * DB_RECORD + 16:
        raise LmdbFileDamaged(f"LMDB meta page {index} is cut short")
    _pgno, _pad, flags, _lo, _up = _HEADER.unpack_from(raw)
    magic, version, _addr, _mapsize = _META.unpack_from(raw, PAGE_HEADER)
    if not flags & P_META or magic != MAGIC:
        raise LmdbFileDamaged(f"LMDB meta page {index} is damaged (no LMDB magic number)")
    if version != DATA_VERSION:
        raise LmdbFileDamaged(f"LMDB meta page {index} has data format version {version}, not {DATA_VERSION}")
    at = PAGE_HEADER + _META.size
    page_size, free = DbRecord.parse(raw[at : at + DB_RECORD])
    _, main = DbRecord.parse(raw[at + DB_RECORD : at + 2 * DB_RECORD])
    last_pg, txnid = struct.unpack_from("<QQ", raw, at + 2 * DB_RECORD)
    if page_size < 512 or page_size > 65536 or page_size & (page_size - 1):
        raise LmdbFileDamaged(f"LMDB meta page {index} is damaged (page size {page_size})")
    return page_size, Meta(page_size, last_pg, txnid, free, main)


def read_meta(path: Path) -> Meta:
    """The meta LMDB would use (the newer of the two), after checking both and the file's length."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size == 0:
            raise LmdbFileDamaged(f"{path.name} is empty (0 bytes)")
        page_size, first = _parse_meta(os.pread(f.fileno(), 4096, 0), 0)
        _, second = _parse_meta(os.pread(f.fileno(), 4096, page_size), 1)
    meta = second if second.txnid > first.txnid else first
    for name, db in (("free-page", meta.free), ("main", meta.main)):
        if db.root != P_INVALID and not 2 <= db.root <= meta.last_pg:
            raise LmdbFileDamaged(f"LMDB meta names page {db.root} as the {name} root, outside pages 2..{meta.last_pg}")
    if size < meta.needed_bytes:
        raise LmdbFileDamaged(
            f"{path.name} is truncated: {size} bytes, its LMDB header needs {meta.needed_bytes} "
            f"({meta.last_pg + 1} pages of {meta.page_size})"
        )
    return meta


class _Walker:
    """One pass over every reachable page of one file (see the module docstring)."""

    def __init__(self, fd: int, meta: Meta, shallow: frozenset[bytes]) -> None:
        self.fd = fd
        self.meta = meta
        self.shallow = shallow
        self.seen = bytearray(meta.last_pg + 1)
        self.stats = WalkStats()
        self.named: list[tuple[bytes, DbRecord]] = []

    def page(self, pgno: int, size: int | None = None) -> bytes:
        if not 2 <= pgno <= self.meta.last_pg:
            raise LmdbFileDamaged(f"a reference to page {pgno}, outside pages 2..{self.meta.last_pg}")
        if self.seen[pgno]:
            raise LmdbFileDamaged(f"page {pgno} is referenced twice")
        self.seen[pgno] = 1
        self.stats.pages += 1
        want = self.meta.page_size if size is None else size
        raw = os.pread(self.fd, want, pgno * self.meta.page_size)
        if len(raw) < want:
            raise LmdbFileDamaged(f"page {pgno} lies past the end of the file")
        if _HEADER.unpack_from(raw)[0] != pgno:
            raise LmdbFileDamaged(f"page {pgno} is damaged (its header names page {_HEADER.unpack_from(raw)[0]})")
        return raw

    def walk_db(self, name: bytes, db: DbRecord) -> None:
        if db.root == P_INVALID:
            self.stats.entries[name] = 0
            return
        entries = 0
        stack = [(db.root, 1)]
        while stack:
            pgno, depth = stack.pop()
            leaf = depth >= db.depth
            if leaf and name in self.shallow:
                self._leaf_header(pgno, self.page(pgno, PAGE_HEADER))
                continue
            raw = self.page(pgno)
            count = self._check_header(pgno, raw, leaf)
            offsets = struct.unpack_from(f"<{count}H", raw, PAGE_HEADER)
            if leaf:
                self._leaf_page(name, pgno, raw, offsets)
                entries += count
            else:
                stack.extend((self._branch_child(pgno, raw, off), depth + 1) for off in offsets)
        if name not in self.shallow and entries != db.entries:
            raise LmdbFileDamaged(f"database {name!r} holds {entries} entries, its record says {db.entries}")
        self.stats.entries[name] = entries

    def _leaf_page(self, name: bytes, pgno: int, raw: bytes, offsets: tuple[int, ...]) -> None:
        """Every node of a leaf page; plain in-page values take the fast path, the rest `_leaf_node`."""
        upper = _HEADER.unpack_from(raw)[4]
        size = len(raw)
        unpack = _NODE.unpack_from
        for off in offsets:
            if upper <= off <= size - NODE_HEADER:
                lo, hi, flags, ksize = unpack(raw, off)
                if not flags and ksize <= MAX_KEY and off + NODE_HEADER + ksize + (lo | hi << 16) <= size:
                    continue
            self._leaf_node(name, pgno, raw, off)

    def _leaf_header(self, pgno: int, raw: bytes) -> None:
        self._bounds(pgno, raw, P_LEAF)

    def _check_header(self, pgno: int, raw: bytes, leaf: bool) -> int:
        count = self._bounds(pgno, raw, P_LEAF if leaf else P_BRANCH)
        if not leaf and count < 2:
            raise LmdbFileDamaged(f"page {pgno} is damaged (a branch page with {count} key)")
        return count

    def _bounds(self, pgno: int, raw: bytes, kind: int) -> int:
        _pgno, _pad, flags, lower, upper = _HEADER.unpack_from(raw)
        what = "leaf" if kind == P_LEAF else "branch"
        if flags & (P_BRANCH | P_LEAF | P_OVERFLOW | P_META | P_LEAF2) != kind:
            raise LmdbFileDamaged(f"page {pgno} is damaged (flags {flags:#x} where a {what} page belongs)")
        if not PAGE_HEADER <= lower <= upper <= self.meta.page_size or lower == PAGE_HEADER:
            raise LmdbFileDamaged(f"page {pgno} is damaged (free-space bounds {lower}..{upper})")
        return int(lower - PAGE_HEADER) >> 1

    def _node(self, pgno: int, raw: bytes, off: int) -> tuple[int, int, int, int]:
        if not _HEADER.unpack_from(raw)[4] <= off <= len(raw) - NODE_HEADER:
            raise LmdbFileDamaged(f"page {pgno} is damaged (a node at offset {off})")
        lo, hi, flags, ksize = _NODE.unpack_from(raw, off)
        if ksize > MAX_KEY or off + NODE_HEADER + ksize > len(raw):
            raise LmdbFileDamaged(f"page {pgno} is damaged (a {ksize}-byte key at offset {off})")
        return lo, hi, flags, ksize

    def _branch_child(self, pgno: int, raw: bytes, off: int) -> int:
        lo, hi, flags, _ksize = self._node(pgno, raw, off)
        return lo | hi << 16 | flags << 32

    def _leaf_node(self, name: bytes, pgno: int, raw: bytes, off: int) -> None:
        lo, hi, flags, ksize = self._node(pgno, raw, off)
        dsize = lo | hi << 16
        start = off + NODE_HEADER + ksize
        if flags & F_DUPDATA:
            raise LmdbFileDamaged(f"page {pgno} is damaged (a duplicate-data node in a database without them)")
        if flags & F_BIGDATA:
            if start + 8 > len(raw):
                raise LmdbFileDamaged(f"page {pgno} is damaged (an overflow reference past the page)")
            self._overflow(struct.unpack_from("<Q", raw, start)[0], dsize)
            return
        if start + dsize > len(raw):
            raise LmdbFileDamaged(f"page {pgno} is damaged (a {dsize}-byte value past the page)")
        if flags & F_SUBDATA:
            if name != b"" or dsize != DB_RECORD:
                raise LmdbFileDamaged(f"page {pgno} is damaged (a sub-database record of {dsize} bytes)")
            key = raw[off + NODE_HEADER : start]
            self.named.append((key, DbRecord.parse(raw[start : start + DB_RECORD])[1]))

    def _overflow(self, first: int, dsize: int) -> None:
        raw = self.page(first, PAGE_HEADER)
        flags = _HEADER.unpack_from(raw)[2]
        pages = struct.unpack_from("<I", raw, 12)[0]
        if not flags & P_OVERFLOW or pages * self.meta.page_size < dsize + PAGE_HEADER:
            raise LmdbFileDamaged(f"page {first} is damaged (not the overflow run of a {dsize}-byte value)")
        if first + pages - 1 > self.meta.last_pg:
            raise LmdbFileDamaged(f"overflow pages {first}..{first + pages - 1} run past page {self.meta.last_pg}")
        for pgno in range(first + 1, first + pages):
            if self.seen[pgno]:
                raise LmdbFileDamaged(f"page {pgno} is referenced twice")
            self.seen[pgno] = 1


def walk(path: Path, meta: Meta, *, shallow: frozenset[bytes] = frozenset()) -> WalkStats:
    """Check every page reachable from `meta` (see the module docstring); LmdbFileDamaged names the first
    problem. The free list is reported under b"\\x00free", the main database under b""."""
    with open(path, "rb") as f:
        walker = _Walker(f.fileno(), meta, shallow)
        walker.walk_db(b"\x00free", meta.free)
        walker.walk_db(b"", meta.main)
        for name, db in walker.named:
            walker.walk_db(name, db)
    walker.stats.seen = walker.seen
    return walker.stats


def check_file(path: Path, *, shallow: frozenset[bytes] = frozenset()) -> Meta:
    """`read_meta` then `walk`: once this returns, LMDB can map the file without faulting on it."""
    meta = read_meta(path)
    walk(path, meta, shallow=shallow)
    return meta
