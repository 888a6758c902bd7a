"""subscribe_messages and subscribe_blocks resume across a node restart: the node drains (its streams end
with UNAVAILABLE/DRAINING), is down for a while (connections refused), and comes back on the same address
with the same data; the subscription reconnects after the last event id it handed out and goes on with no
gap and no repeat. Without `resume` the same restart ends the subscription with Unavailable."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from chain.v1 import rpc_pb2
from node.errors import Reason
from node.sdk.aio import AsyncChainClient
from node.sdk.errors import Unavailable
from node.sdk.rpc import ChainClient
from tests.fixtures.actors import fresh
from tests.fixtures.nodeproc import NodeProcess
from tests.fixtures.procs import free_port


class Restartable:
    """A node on a fixed gRPC port that can be stopped and started again on its data."""

    def __init__(self, data: Path) -> None:
        self.data = data
        self.port = free_port()
        self.node = self._start()

    def _start(self) -> NodeProcess:
        return NodeProcess(self.data, "--grpc-addr", f"127.0.0.1:{self.port}").start()

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    def commit(self, n: int) -> list[bytes]:
        with ChainClient(self.target) as c:
            deadline = time.monotonic() + 30
            while True:  # this process's channels share gRPC's connection to the port, maybe still in backoff
                try:
                    c.get_health()
                    break
                except Unavailable:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.1)
            return [bytes(m.message.hash) for m in c.commit(*(fresh() for _ in range(n)))]

    def restart_later(self, down_seconds: float, then_commit: int) -> tuple[threading.Thread, list[bytes]]:
        """Stop now (the node drains); start again after `down_seconds` and commit `then_commit` messages."""
        self.node.stop()
        committed: list[bytes] = []

        def run() -> None:
            threading.Event().wait(down_seconds)
            self.node = self._start()
            committed.extend(self.commit(then_commit))

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        return thread, committed


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Restartable]:
    r = Restartable(tmp_path / "data")
    yield r
    r.node.stop()


def _until(blocks: Iterator[rpc_pb2.SubscribeBlocksResponse], head: int) -> Iterator[int]:
    for event in blocks:
        yield event.event_id
        if event.event_id >= head:
            return


def test_sync_streams_resume_across_a_restart_without_gap_or_repeat(node: Restartable) -> None:
    before = node.commit(3)
    with ChainClient(node.target) as c:
        messages = c.subscribe_messages(from_block=1)
        blocks = c.subscribe_blocks()  # from now
        plain = c.subscribe_blocks(resume=False)
        before += node.commit(1)  # one block for the two block streams
        total = int(c.get_chain_stats().stats.total_messages)
        seen = [next(messages) for _ in range(total)]
        first_blocks = [next(blocks).event_id]
        next(plain)
        thread, after = node.restart_later(1.5, then_commit=4)
        seen += [next(messages) for _ in range(4)]  # through DRAINING, refused connections, the new node
        thread.join(60)
        head = int(c.list_blocks(page_size=1).blocks[0].header.number)
        later_blocks = list(_until(blocks, head))
        with pytest.raises(Unavailable) as info:  # the gate: without resume the restart ends the stream
            while True:
                next(plain)
    assert info.value.reason in (Reason.DRAINING, Reason.UNAVAILABLE)
    assert [m.event_id for m in seen] == list(range(1, total + 5)), "a gap or a repeat in the message event ids"
    hashes = [bytes(m.message.message.hash) for m in seen]
    assert set(before) <= set(hashes[:total]) and hashes[total:] == after
    numbers = first_blocks + later_blocks
    assert numbers == list(range(numbers[0], head + 1)), "a gap or a repeat in the blocks"


async def test_async_streams_resume_across_a_restart_without_gap_or_repeat(node: Restartable) -> None:
    await asyncio.to_thread(node.commit, 2)
    async with AsyncChainClient(node.target) as c:
        total = int((await c.get_chain_stats()).stats.total_messages)
        messages = c.subscribe_messages(after_event_id=total - 1)
        blocks = c.subscribe_blocks(from_block=1)
        seen = [await anext(messages)]
        first_block = (await anext(blocks)).event_id
        thread, after = await asyncio.to_thread(node.restart_later, 1.5, 3)
        seen += [await anext(messages) for _ in range(3)]
        await asyncio.to_thread(thread.join, 60)
        head = int((await c.list_blocks(page_size=1)).blocks[0].header.number)
        later = []
        async for event in blocks:
            later.append(event.event_id)
            if event.event_id >= head:
                break
        await messages.aclose()
    assert [m.event_id for m in seen] == list(range(total, total + 4))
    assert [bytes(m.message.message.hash) for m in seen[1:]] == after
    assert [first_block, *later] == list(range(1, head + 1))
