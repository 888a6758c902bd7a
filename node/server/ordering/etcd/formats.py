"""Which log-entry formats the leader writes: `W` (the block and its write set) only while every live member
reads it, `B` (the block alone) otherwise.

Each member lists the formats it reads in its member record (`member/<id>`, `"reads": ["B", "W"]`); a record
without the field is a release that reads only `B`. During a rolling upgrade the members of the previous
release would stall on a `W` entry (an unknown encoding, retried forever), so the leader, once per
maintenance round, reads the live records and writes `B` while any of them lacks `W`. A member applying a `B`
entry executes the block again, which is always correct, only slower.

`READS_ENV` (tests only) makes a member behave as the previous release: it advertises and reads `B` alone.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from node.errors import InvariantBroken
from node.server.ordering.etcd.log import BlockLog, LogEntry

BLOCK_ONLY = "B"
WITH_WRITE_SET = "W"
READS: tuple[str, ...] = (BLOCK_ONLY, WITH_WRITE_SET)  # what this release reads
LEGACY_READS: tuple[str, ...] = (BLOCK_ONLY,)  # what a record without "reads" means
READS_ENV = "CHAIN_TEST_LOG_READS"  # tests only: e.g. "B" for a member of the previous release


@dataclass(frozen=True)
class Verdict:
    """Whether the leader writes write sets, and, when it does not, which members hold it back."""

    write_sets: bool
    lacking: tuple[str, ...] = ()  # member ids whose record does not list W (sorted)

    @property
    def format(self) -> str:
        return WITH_WRITE_SET if self.write_sets else BLOCK_ONLY

    def why(self) -> str:
        if self.write_sets:
            return f"every live member reads {WITH_WRITE_SET} entries"
        return f"member(s) {', '.join(self.lacking)} do not read {WITH_WRITE_SET} entries"


def advertised(env: Mapping[str, str]) -> tuple[str, ...]:
    """The formats this member lists in its record: READS, or (tests only) what `READS_ENV` names."""
    wanted = env.get(READS_ENV, "").replace(",", " ").split()
    return tuple(sorted(set(wanted))) if wanted else READS


def reads_of(doc: Mapping[str, object]) -> tuple[str, ...]:
    """The formats a member record lists (LEGACY_READS when it has no `reads`, or one that is not a list)."""
    reads = doc.get("reads")
    if not isinstance(reads, list):
        return LEGACY_READS
    return tuple(str(r) for r in reads)


def decide(records: Iterable[tuple[str, Mapping[str, object]]]) -> Verdict:
    """W while every live member record lists W; B, naming the members that do not, otherwise. With no
    record at all (none published yet) the leader writes B: it does not know who reads the log."""
    seen, lacking = 0, []
    for member, doc in records:
        seen += 1
        if WITH_WRITE_SET not in reads_of(doc):
            lacking.append(member)
    if not seen:
        return Verdict(False, ("(no member record yet)",))
    return Verdict(not lacking, tuple(sorted(lacking)))


def switched(before: Verdict | None, now: Verdict) -> bool:
    """Whether the leader says so in its log: the format changed, or its first verdict since leading is B."""
    if before is None:
        return not now.write_sets
    return before.write_sets != now.write_sets


def parse_records(kvs: Iterable[tuple[bytes, bytes]], prefix: bytes) -> list[tuple[str, Mapping[str, object]]]:
    """(member id, record) of each `member/<id>` key and value; a record that is not a JSON object counts as
    one without `reads`."""
    out: list[tuple[str, Mapping[str, object]]] = []
    for key, value in kvs:
        try:
            doc = json.loads(value)
        except ValueError:
            doc = {}
        out.append((key[len(prefix) :].decode(errors="replace"), doc if isinstance(doc, dict) else {}))
    return out


class BlockOnlyLog(BlockLog):
    """The log as a member of the previous release reads it (tests only, `READS_ENV`): a `W` entry is an
    unknown encoding, refused, and the round retried."""

    async def entry(self, number: int, value: bytes) -> LogEntry:
        read = await super().entry(number, value)
        if read.write_set is not None:
            raise InvariantBroken(f"log entry {number}: unknown encoding {WITH_WRITE_SET.encode()!r}")
        return read
