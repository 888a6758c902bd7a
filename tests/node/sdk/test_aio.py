"""AsyncChainClient against a real node: writes, typed reads, a paginated async iterator, a stream, and the
same ChainError families as ChainClient."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from chain.v1 import message_pb2 as pb
from node.errors import Reason
from node.sdk import statekeys
from node.sdk.aio import AsyncChainClient
from node.sdk.calls import error_of
from node.sdk.errors import InvalidArgument, NotFound, StateConflict, Unauthorized
from tests.fixtures.actors import RemoteActor, authority_builder
from tests.fixtures.nodeproc import NodeProcess
from tests.node.sdk.chaindata import commit_meta


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    proc = NodeProcess(tmp_path_factory.mktemp("aio") / "data").start()
    yield proc
    proc.stop()


async def test_write_read_paginate_and_stream(node: NodeProcess) -> None:
    alice = RemoteActor()
    async with AsyncChainClient(node.grpc_target) as c:
        start = (await c.get_chain_stats()).stats.total_messages
        stream = c.subscribe_messages(after_event_id=start)  # an async generator starts when first iterated
        grant = authority_builder(node.authority()).storage_grant(alice.address, 2)
        await c.commit(alice.b.signer_add(alice.wallet, 0), grant)
        (create,) = await c.commit(alice.b.project_create("async"))
        pid = bytes(create.message.hash)
        commits = [commit_meta(1), commit_meta(2, commit_meta(1).hash), commit_meta(3, commit_meta(2).hash)]
        message_hash = await c.submit(alice.b.commit_bundle(pid, commits))
        committed = await c.wait_committed(message_hash)
        assert committed.message.data.type == pb.MESSAGE_TYPE_COMMIT_BUNDLE

        assert (await c.get_project(project_id=pid)).project.name == "async"
        assert (await c.get_account(owner_address=alice.address)).storage_units == 2
        walked = [x.hash async for x in c.iter_commits(project_id=pid, page_size=1)]
        assert walked == [bytes(m.hash) for m in reversed(commits)]

        proof = await c.get_operation_proof(key=statekeys.project_key(pid))
        root = (await c.get_block(block_number=proof.block_number)).block.header.state_root
        assert proof.verify(bytes(root)) and not proof.verify(bytes(32))

        events = []
        async for event in stream:
            events.append(event)
            if bytes(event.message.message.hash) == message_hash:
                break
        await stream.aclose()
        assert [bytes(e.message.message.hash) for e in events[-2:]] == [pid, message_hash]
        assert [e.event_id for e in events] == list(range(start + 1, start + 1 + len(events)))


async def test_errors_are_the_same_families(node: NodeProcess) -> None:
    async with AsyncChainClient(node.grpc_target) as c:
        with pytest.raises(NotFound):
            await c.get_project(project_id=os.urandom(32))
        with pytest.raises(InvalidArgument) as bad:
            await c.get_commit(project_id=b"x", commit_hash=b"y")
        assert bad.value.field == "project_id"
        stranger = RemoteActor()
        with pytest.raises(Unauthorized) as info:
            await c.submit(stranger.b.follow(os.urandom(20)))
        assert info.value.reason == Reason.UNKNOWN_SIGNER
        (result,) = await c.batch([stranger.b.follow(os.urandom(20))])
        assert isinstance(error_of(result), Unauthorized)
        with pytest.raises(InvalidArgument):
            [x async for x in c.iter_refs(project_id=b"x")]


async def test_commit_raises_the_rejection(node: NodeProcess) -> None:
    alice = RemoteActor()
    async with AsyncChainClient(node.grpc_target) as c:
        await c.commit(alice.b.signer_add(alice.wallet, 0))
        with pytest.raises(StateConflict) as info:
            await c.commit(alice.b.commit_bundle(os.urandom(32), [commit_meta(9)]))
        assert info.value.reason == Reason.PROJECT_NOT_FOUND
