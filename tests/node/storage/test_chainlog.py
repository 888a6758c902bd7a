"""Store format 3 (node/storage/chainlog.py): each committed message stored once, under its event id.

The same blocks give the same answers from a store written by this release, from that store rewritten as
format 2 wrote it (tests/fixtures/formats.py) and opened by this release, and from that store once it has
committed new blocks in format 3 beside its old ones: every block (with and without its chunks, a block of
more than one chunk among them), every message by hash, every page of ListMessages and ListBlocks, every
account's and project's activity, and the event history the streams replay. Fails when a reader takes one
form for the other."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from chain.v1 import rpc_pb2
from node.chain import Chain
from node.constants import MESSAGES_PER_CHUNK
from node.query.reader import Reader
from node.server.rpc.servicer import _events_after
from node.storage import chainlog, schema
from node.storage.identity import FORMAT_VERSION, read_identity_file
from tests.fixtures.formats import to_format_2
from tests.fixtures.stores import follow
from tests.harness import Harness, commit_meta
from tests.node.state.helpers import created_id


def answers(chain: Chain, accounts: list[bytes], projects: list[bytes]) -> list[bytes]:
    """Every read of blocks and messages the store serves, serialized."""
    out: list[bytes] = []
    with chain.read() as (view, nodes):
        r = Reader(view, nodes)
        height = r.head().header.number
        for n in range(height + 1):
            out.append(r.get_block(rpc_pb2.GetBlockRequest(block_number=n)).SerializeToString())
            for chunk in r.get_block(rpc_pb2.GetBlockRequest(block_number=n)).block.chunks:
                for m in chunk.messages:
                    out.append(r.get_message(rpc_pb2.GetMessageRequest(hash=m.hash)).SerializeToString())
        for chunks in (True, False):
            token = ""
            while True:
                page = r.list_blocks(rpc_pb2.ListBlocksRequest(page_size=7, page_token=token, include_chunks=chunks))
                out.append(page.SerializeToString())
                if not (token := page.next_page_token):
                    break
        token = ""
        while True:
            msgs = r.list_messages(rpc_pb2.ListMessagesRequest(start_block=1, page_size=150, page_token=token))
            out.append(msgs.SerializeToString())
            if not (token := msgs.next_page_token):
                break
        for a in accounts:
            req = rpc_pb2.GetAccountActivityRequest(owner_address=a, page_size=200)
            out.append(r.get_account_activity(req).SerializeToString())
        for p in projects:
            out.append(r.get_project_activity(rpc_pb2.GetProjectActivityRequest(project_id=p)).SerializeToString())
        out += [m.SerializeToString() for m in _events_after(r, 0, 10**6)]
    return out


def test_format_2_and_format_3_stores_answer_alike(tmp_path: Path) -> None:
    h = Harness(tmp_path / "new")
    actors = [h.actor(units=2) for _ in range(3)]
    projects = [created_id(h.commit(a.b.project_create(f"p{i}"))) for i, a in enumerate(actors)]
    h.commit(*[actors[0].b.follow(os.urandom(20)) for _ in range(MESSAGES_PER_CHUNK + 20)])  # two chunks
    h.commit(actors[1].b.commit_bundle(projects[1], [commit_meta(1), commit_meta(2, commit_meta(1).hash)]))
    h.commit()  # an empty block
    h.commit(*[a.b.follow(os.urandom(20)) for a in actors])
    addresses = [a.address for a in actors]
    with h.chain.read() as (view, _):
        some = h.chain.head()
        raw = view.get(schema.block_key(some.header.number)) or b""
        assert raw[:1] == chainlog.COMPACT  # format 3 as written: the block without its messages
        any_hash = chainlog.read_block(view, some.header.number).chunks[0].messages[0].hash  # type: ignore[union-attr]
        assert len(view.get(schema.message_key(any_hash)) or b"") == 8  # the hash index holds the event id
    native = answers(h.chain, addresses, projects)
    params = h.chain.params
    h.chain.close()

    shutil.copytree(tmp_path / "new", tmp_path / "old")
    to_format_2(tmp_path / "old")
    old = Chain.open(tmp_path / "old", params)
    try:
        with old.read() as (view, _):
            raw = view.get(schema.block_key(some.header.number)) or b""
            assert raw[:1] != chainlog.COMPACT and len(view.get(schema.message_key(any_hash)) or b"") > 8
        assert answers(old, addresses, projects) == native
        identity = read_identity_file(tmp_path / "old")
        assert identity is not None and identity.format_version == FORMAT_VERSION  # opened for writing: marked

        h.chain = Chain.open(tmp_path / "new", params)
        more = [a.b.follow(os.urandom(20)) for a in actors]
        h.commit(*more)  # the same new block on both: format 3 beside format 2's blocks
        follow(old, h.chain)
        assert old.head() == h.chain.head()
        assert answers(old, addresses, projects) == answers(h.chain, addresses, projects)
    finally:
        old.close()
