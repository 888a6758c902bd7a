"""Per-block limits hold in both directions: build leaves excess out, apply refuses an oversized block."""

import pytest

from chain.v1 import block_pb2
from chain.v1 import message_pb2 as pb
from node.block import header_hash, make_chunks, message_root
from node.constants import MAX_BLOCK_MESSAGES_PER_PROJECT
from node.errors import InvalidBlock, Reason
from tests.harness import Harness, commit_meta


def test_build_leaves_out_messages_beyond_the_per_project_limit(tmp_path):
    h = Harness(tmp_path / "chain")
    alice = h.actor()
    pid = h.commit(alice.b.project_create("busy")).applied[0].message.hash
    msgs = [alice.b.commit_bundle(pid, [commit_meta(i)]) for i in range(MAX_BLOCK_MESSAGES_PER_PROJECT + 5)]
    out = h.build(*msgs)
    assert len(out.applied) == MAX_BLOCK_MESSAGES_PER_PROJECT
    assert [d.error.reason for d in out.dropped] == [Reason.LIMIT_EXCEEDED] * 5


def test_apply_refuses_a_block_over_the_per_project_limit(tmp_path):
    h = Harness(tmp_path / "chain")
    alice = h.actor()
    pid = h.commit(alice.b.project_create("busy")).applied[0].message.hash
    msgs = [
        alice.b.project_metadata(pid, pb.PROJECT_FIELD_WEBSITE, f"https://{i}.test", timestamp=h.now)
        for i in range(MAX_BLOCK_MESSAGES_PER_PROJECT + 1)
    ]
    parent = h.chain.head()
    chunks = make_chunks(msgs)
    header = block_pb2.BlockHeader(
        number=parent.header.number + 1,
        parent_hash=parent.hash,
        timestamp_ms=h.now * 1000,
        message_root=message_root([m.hash for m in msgs]),
        message_count=len(msgs),
        chunk_hashes=[c.chunk_hash for c in chunks],
        network=h.chain.params.network,
        protocol_version=1,
    )
    block = block_pb2.Block(header=header, hash=header_hash(header), chunks=chunks)
    with pytest.raises(InvalidBlock) as exc:
        h.chain.apply(block)
    assert exc.value.field == "messages per project"
