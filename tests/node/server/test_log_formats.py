"""What the leader writes into the log (node/server/ordering/etcd/formats.py): `W` entries (the block and its
write set) only while every live member record lists `W`; `B` (the block alone) otherwise, naming who holds
it back. A record without `reads` is a release that reads only `B`."""

from __future__ import annotations

import asyncio
import json
from typing import cast

import pytest

from chain.v1 import block_pb2
from node.errors import InvariantBroken
from node.server.ordering.etcd.client import EtcdClient
from node.server.ordering.etcd.formats import (
    READS,
    READS_ENV,
    BlockOnlyLog,
    Verdict,
    advertised,
    decide,
    parse_records,
    reads_of,
    switched,
)
from node.server.ordering.etcd.log import Keys, entry_bytes


def test_every_member_reading_w_gets_w() -> None:
    verdict = decide([("n0", {"reads": ["B", "W"]}), ("n1", {"reads": ["W", "B"], "applied": 3})])
    assert verdict == Verdict(True)
    assert verdict.format == "W"


def test_one_member_without_w_turns_the_leader_to_b_and_is_named() -> None:
    verdict = decide([("n0", {"reads": ["B", "W"]}), ("n2", {"reads": ["B"]}), ("n1", {"applied": 7})])
    assert verdict == Verdict(False, ("n1", "n2"))
    assert verdict.format == "B"
    assert "n1, n2" in verdict.why()


def test_no_record_means_b() -> None:
    assert not decide([]).write_sets


def test_a_record_without_reads_or_with_a_bad_one_reads_only_b() -> None:
    assert reads_of({"applied": 1}) == ("B",)
    assert reads_of({"reads": "W"}) == ("B",)
    assert reads_of({"reads": ["B", "W"]}) == ("B", "W")


def test_records_parse_by_member_id_and_garbage_counts_as_previous_release() -> None:
    prefix = Keys(b"/p/").member_prefix
    kvs = [(prefix + b"n0", json.dumps({"reads": ["B", "W"]}).encode()), (prefix + b"n1", b"not json")]
    records = parse_records(kvs, prefix)
    assert [m for m, _ in records] == ["n0", "n1"]
    assert decide(records) == Verdict(False, ("n1",))


def test_advertised_is_this_release_unless_the_test_hook_says_otherwise() -> None:
    assert advertised({}) == READS == ("B", "W")
    assert advertised({READS_ENV: "B"}) == ("B",)
    assert advertised({READS_ENV: "W,B"}) == ("B", "W")


@pytest.mark.parametrize(
    ("before", "now", "said"),
    [
        (None, Verdict(True), False),  # a leader starting on W says nothing: the usual case
        (None, Verdict(False, ("n1",)), True),
        (Verdict(True), Verdict(False, ("n1",)), True),
        (Verdict(False, ("n1",)), Verdict(True), True),
        (Verdict(False, ("n1",)), Verdict(False, ("n2",)), False),
        (Verdict(True), Verdict(True), False),
    ],
)
def test_the_leader_says_so_once_per_switch(before: Verdict | None, now: Verdict, said: bool) -> None:
    assert switched(before, now) is said


def test_the_previous_release_log_refuses_w_entries_and_reads_b() -> None:
    """The test hook's log (a member of the previous release): W is an unknown encoding, B reads as ever."""
    log = BlockOnlyLog(cast(EtcdClient, None), Keys(b"/p/"))  # inline entries never reach etcd
    block = block_pb2.Block()
    block.header.number = 5
    assert asyncio.run(log.entry(5, entry_bytes(block, None))).block == block
    with pytest.raises(InvariantBroken, match="unknown encoding"):
        asyncio.run(log.entry(5, entry_bytes(block, b"writes")))
