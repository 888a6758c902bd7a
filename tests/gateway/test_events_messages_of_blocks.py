"""The gateway's message feed reads SubscribeBlocks with the blocks' messages (`MessagesOfBlocks`) and gives
exactly what the node's SubscribeMessages gives: the same event ids, block numbers, indexes and message bytes,
from a block or resumed after an event in the middle of a block, over a chain with empty blocks between
(a real chain-node, the `node` fixture of tests/gateway/conftest.py)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest

from chain.v1 import message_pb2 as pb
from chain.v1 import rpc_pb2, service_pb2_grpc
from gateway.events.feeds import MessagesOfBlocks, open_node_stream
from gateway.events.model import Kind
from gateway.upstream import Upstream
from tests.fixtures.actors import new_account
from tests.fixtures.events import bio_messages, commit_in_batches
from tests.fixtures.nodeproc import NodeProcess


async def first(stream: Any, n: int) -> list[tuple[int, bytes]]:
    """The first `n` responses' event ids and serialized records (deterministic bytes), then cancel."""
    out: list[tuple[int, bytes]] = []
    iterator: AsyncIterator[rpc_pb2.SubscribeMessagesResponse] = stream.__aiter__()
    try:
        async with asyncio.timeout(60):
            while len(out) < n:
                response = await iterator.__anext__()
                assert response.event_id == response.message.event_id
                out.append((int(response.event_id), response.message.SerializeToString(deterministic=True)))
    finally:
        stream.cancel()
    return out


async def test_messages_of_blocks_equal_subscribe_messages_from_a_block_and_after_an_event(node: NodeProcess) -> None:
    def commit() -> list[tuple[int, int]]:
        with node.client() as c:
            actor = new_account(c, node.authority())
            placed = commit_in_batches(c, bio_messages(actor, 3, "a"), 3)  # one block of 3
            placed += commit_in_batches(c, bio_messages(actor, 7, "b"), 2)  # blocks of 2, 2, 2, 1
            return placed

    placed = await asyncio.to_thread(commit)
    start = placed[0][0]
    assert len({block for block, _ in placed}) >= 4  # several blocks, empty ones cut between them (50 ms)
    upstream = Upstream(node.grpc_target)
    try:
        reference = await first(
            upstream.chain.SubscribeMessages(rpc_pb2.SubscribeMessagesRequest(from_block=start)), len(placed)
        )
        got = await first(open_node_stream(upstream, Kind.MESSAGES, from_block=start), len(placed))
        assert got == reference
        assert [e for e, _ in reference] == list(range(reference[0][0], reference[0][0] + len(placed)))

        # resumed after an event in the middle of a later block: the rest, nothing before it, nothing twice
        at = next(i for i in range(3, len(placed) - 1) if placed[i][0] == placed[i + 1][0])
        after, block = reference[at][0], placed[at][0]
        resumed = await first(
            open_node_stream(upstream, Kind.MESSAGES, after_event_id=after, after_block=block), len(placed) - at - 1
        )
        assert resumed == reference[at + 1 :]
        # the same without the block (a feed that never published one): read from block 1, still exact
        unplaced = await first(open_node_stream(upstream, Kind.MESSAGES, after_event_id=after), len(placed) - at - 1)
        assert unplaced == reference[at + 1 :]
    finally:
        await upstream.channel.close(None)


async def test_a_block_stream_without_messages_is_refused_not_counted_wrong(node: NodeProcess) -> None:
    """A block whose messages did not come (a node that ignored include_chunks) would shift every later
    event id; the feed raises instead (it logs, backs off and reconnects), yielding nothing for it."""

    def commit() -> int:
        with node.client() as c:
            actor = new_account(c, node.authority())
            return commit_in_batches(c, bio_messages(actor, 2, "c"), 2)[0][0]

    block = await asyncio.to_thread(commit)
    upstream = Upstream(node.grpc_target)
    try:
        stream = MessagesOfBlocks(upstream, block, 0, 10.0)
        stream._call.cancel()
        stream._call = service_pb2_grpc.ChainServiceStub(upstream.channel).SubscribeBlocks(
            rpc_pb2.SubscribeBlocksRequest(from_block=block, include_chunks=False)
        )
        try:
            with pytest.raises(ValueError, match="of its 2 messages"):
                async with asyncio.timeout(10):  # without the check nothing comes, and this times out
                    async for _ in stream:
                        raise AssertionError("no event may come from a block without its messages")
        finally:
            stream.cancel()
    finally:
        await upstream.channel.close(None)


async def test_a_block_too_large_for_one_grpc_message_goes_on_with_subscribe_messages(node: NodeProcess) -> None:
    """Blocks have no byte limit: one larger than the channel's message limit ends the blocks stream with
    RESOURCE_EXHAUSTED. The feed then follows SubscribeMessages from where it was, and gives the same
    events. Here the limit is the client's (16 KiB) and the block holds 16 messages of ~4 KiB."""

    def commit() -> list[tuple[int, int]]:
        with node.client() as c:
            actor = new_account(c, node.authority())
            create = actor.b.project_create(f"big-{os.urandom(4).hex()}")
            placed = commit_in_batches(c, [create], 1)
            texts = [f"{i} " + "d" * 4000 for i in range(16)]
            updates = [actor.b.project_metadata(bytes(create.hash), pb.PROJECT_FIELD_DESCRIPTION, t) for t in texts]
            return placed + commit_in_batches(c, updates, 16)

    placed = await asyncio.to_thread(commit)
    start = placed[0][0]
    upstream = Upstream(node.grpc_target)
    small = Upstream(node.grpc_target)
    await small.channel.close(None)
    small.channel = grpc.aio.insecure_channel(node.grpc_target, options=[("grpc.max_receive_message_length", 16384)])
    small.chain = service_pb2_grpc.ChainServiceStub(small.channel)
    try:
        reference = await first(
            upstream.chain.SubscribeMessages(rpc_pb2.SubscribeMessagesRequest(from_block=start)), len(placed)
        )
        got = await first(open_node_stream(small, Kind.MESSAGES, from_block=start), len(placed))
        assert got == reference
    finally:
        await upstream.channel.close(None)
        await small.channel.close(None)
