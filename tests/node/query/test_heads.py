"""HeadMemo (node/query/heads.py): a read worker's record check and head decoding, once per head record.

The memo must still refuse a damaged head record after a sound one passed, and a Reader using it must
see a new head as soon as the store holds one."""

from __future__ import annotations

from pathlib import Path

import pytest

from chain.v1 import rpc_pb2
from node.chain import Chain
from node.query import heads
from node.query.heads import HEAD_KEY, HeadMemo
from node.query.reader import Reader
from node.storage import schema
from node.storage.integrity import check_record
from tests.harness import Harness


def _raw_head(chain: Chain) -> bytes:
    with chain.read() as (view, _):
        raw = view.get(HEAD_KEY)
    assert raw is not None
    return raw


def test_a_damaged_head_record_is_refused_after_a_sound_one_passed(tmp_path: Path) -> None:
    h = Harness(tmp_path / "chain")
    memo = HeadMemo()
    sound = _raw_head(h.chain)
    assert memo.check(HEAD_KEY, sound) is None
    assert memo.check(HEAD_KEY, sound) is None  # remembered
    damaged = bytearray(sound)
    at = damaged.find(h.chain.head().header.state_root)
    damaged[at] ^= 0xFF  # the header no longer hashes to the block's hash
    problem = memo.check(HEAD_KEY, bytes(damaged))
    assert problem is not None and "does not hash" in problem
    assert memo.check(HEAD_KEY, sound) is None


def test_a_reader_with_the_memo_sees_each_new_head_and_answers_as_without(tmp_path: Path) -> None:
    h = Harness(tmp_path / "chain")
    memo = HeadMemo()
    alice = h.actor()
    request = rpc_pb2.GetOperationProofRequest(key=schema.account_key(alice.address))
    for _ in range(3):
        with h.chain.read() as (view, nodes):
            remembered = Reader(view, nodes, memo).get_operation_proof(request)
            plain = Reader(view, nodes).get_operation_proof(request)
        assert remembered == plain
        assert remembered.block_number == h.chain.height
        h.commit(alice.b.project_create(f"p{h.chain.height}", "moves the head"))


def test_a_chain_checks_its_head_through_its_own_memo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Chain.open (the node's main process) and Chain.open_reader (a worker) both read through chain.heads:
    the head record is checked (a parse and a hash of the whole block) and decoded once per record."""
    h = Harness(tmp_path / "chain")
    h.actor()
    h.chain.close()
    checked: list[bytes] = []

    def counting(key: bytes, value: bytes) -> str | None:
        if key == HEAD_KEY:
            checked.append(value)
        return check_record(key, value)

    monkeypatch.setattr(heads, "check_record", counting)
    for opener in (Chain.open, Chain.open_reader):
        checked.clear()
        chain = opener(tmp_path / "chain")  # its start-up check reads the head: the one check it makes
        try:
            blocks = []
            for _ in range(3):
                with chain.read() as (view, nodes):
                    blocks.append(Reader(view, nodes, chain.heads).head())
            assert len(checked) == 1 and blocks[0] is blocks[1] is blocks[2]
        finally:
            chain.close()
