"""The head block a read worker last checked and decoded, kept while the node's head record stays the same.

Every GetAccount, GetOperationProof and proof call reads the head block for its height, time and state root.
Read through the store's record check (node/storage/integrity.py) that is a parse of the whole block and a
hash of its header, then a second parse to decode it: per call, and the head of a busy chain holds
hundreds of messages. `HeadMemo` does both once per head record: its `check` is the store's check, except
that a head record byte-for-byte equal to the last one it passed is passed again (the check is a function
of the bytes); its `block` hands out the block decoded from those bytes. The record itself is still read in
each call's own transaction, so a read sees the newest committed head: nothing to invalidate.

    chain = Chain.open(path)                     # or open_reader: its store checks records with chain.heads.check
    reader = Reader(view, nodes, chain.heads)    # reader.head(): the memo's block while the record is unchanged

Every `Chain` owns one (the node's main process answers reads too: the ReadBatch calls of the gateway, and
every read when it runs without workers). Threads share it: the decoded block and the bytes it came from
are kept as one pair, swapped in one assignment. The block `block` returns is shared between calls: read
it, never change it.
"""

from __future__ import annotations

from chain.v1 import block_pb2
from node.state.access import decode
from node.storage import schema
from node.storage.integrity import check_record

HEAD_KEY = schema.meta_key(schema.META_HEAD)


class HeadMemo:
    def __init__(self) -> None:
        self._passed: bytes | None = None  # the last head record the check passed
        self._decoded: tuple[bytes, block_pb2.Block] | None = None  # (record, its block): one attribute

    def check(self, key: bytes, value: bytes) -> str | None:
        """node.storage.integrity.check_record, remembering the last head record it passed."""
        if key == HEAD_KEY and value == self._passed:
            return None
        problem = check_record(key, value)
        if problem is None and key == HEAD_KEY:
            self._passed = value
        return problem

    def block(self, raw: bytes) -> block_pb2.Block:
        """The head block stored as `raw` (decoded once per distinct record)."""
        decoded = self._decoded
        if decoded is None or decoded[0] != raw:
            decoded = (raw, decode(block_pb2.Block, raw))
            self._decoded = decoded
        return decoded[1]
