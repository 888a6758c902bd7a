"""HeadMemo (node/query/heads.py): a read worker's record check and head decoding, once per head record.

The memo must still refuse a damaged head record after a sound one passed, and a Reader using it must
see a new head as soon as the store holds one."""

from __future__ import annotations

from pathlib import Path

from chain.v1 import rpc_pb2
from node.chain import Chain
from node.query.heads import HEAD_KEY, HeadMemo
from node.query.reader import Reader
from node.storage import schema
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
