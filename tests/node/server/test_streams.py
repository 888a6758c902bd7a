"""Streams over real sockets: ordered delivery, resume without gap or duplicate, slow subscribers dropped."""

from __future__ import annotations

import threading
import time
from typing import Any

import grpc
import pytest

from chain.v1 import message_pb2 as pb
from chain.v1 import rpc_pb2, service_pb2_grpc
from tests.fixtures.actors import new_account
from tests.fixtures.nodeproc import NodeProcess


class Collector(threading.Thread):
    """Reads a stream in the background until it has `want` items or the stream ends."""

    def __init__(self, stream, want: int) -> None:
        super().__init__(daemon=True)
        self.stream = stream
        self.want = want
        self.items: list[Any] = []
        self.error: grpc.RpcError | None = None
        self.done = threading.Event()

    def run(self) -> None:
        try:
            for item in self.stream:
                self.items.append(item)
                if len(self.items) >= self.want:
                    break
        except grpc.RpcError as err:
            self.error = err
        finally:
            self.done.set()


@pytest.fixture
def streaming_node(tmp_path):
    proc = NodeProcess(tmp_path / "data", "--subscriber-queue", "400", "--web-addr", "").start()
    yield proc
    proc.stop()


def test_messages_in_order_with_resume_and_a_slow_subscriber_dropped(streaming_node: NodeProcess):
    node = streaming_node
    c = node.client()
    actors = [new_account(c, node.authority()) for _ in range(3)]
    start = c.stub.GetChainStats(rpc_pb2.GetChainStatsRequest()).stats.total_messages
    total = 1500
    early = Collector(c.stub.SubscribeMessages(rpc_pb2.SubscribeMessagesRequest()), total)
    early.start()
    # a slow subscriber: its own channel without BDP probing (small HTTP/2 window), never read until the end
    slow_channel = grpc.insecure_channel(node.grpc_target, options=[("grpc.http2.bdp_probe", 0)])
    slow = service_pb2_grpc.ChainServiceStub(slow_channel).SubscribeMessages(rpc_pb2.SubscribeMessagesRequest())
    time.sleep(0.3)  # let both subscriptions register
    heights = []
    hashes: list[bytes] = []
    for batch in range(total // 100):
        msgs = [actors[i % 3].b.account_data(pb.ACCOUNT_FIELD_BIO, f"{batch}-{i}-" + "x" * 1000) for i in range(100)]
        hashes += [m.hash for m in msgs]
        c.commit(*msgs)
        heights.append(c.stub.GetNodeStatus(rpc_pb2.GetNodeStatusRequest()).status.block_height)
        if batch == 7:
            resume_after = start + 400  # event ids count every committed message
            mid = Collector(c.stub.SubscribeMessages(rpc_pb2.SubscribeMessagesRequest(after_event_id=resume_after)), 0)
            mid.want = start + total - resume_after
            mid.start()
    assert early.done.wait(60) and mid.done.wait(60)
    assert early.error is None and mid.error is None
    early_ids = [e.event_id for e in early.items]
    assert early_ids == list(range(start + 1, start + total + 1))
    assert [e.message.message.hash for e in early.items] == hashes
    assert [e.event_id for e in mid.items] == list(range(resume_after + 1, start + total + 1))
    # the slow one was cut off: it gets what was buffered, then RESOURCE_EXHAUSTED
    with pytest.raises(grpc.RpcError) as exc:
        for _ in slow:
            pass
    assert exc.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    slow_channel.close()
    # production never waited for it: one block per committed batch, heights strictly increasing
    assert heights == sorted(set(heights))


def test_filters_and_block_stream_resume(streaming_node: NodeProcess):
    node = streaming_node
    c = node.client()
    alice = new_account(c, node.authority())
    p1 = c.commit(alice.b.project_create("one"))[0].message.hash
    p2 = c.commit(alice.b.project_create("two"))[0].message.hash
    only_p1 = Collector(c.stub.SubscribeMessages(rpc_pb2.SubscribeMessagesRequest(project_id=p1, from_block=1)), 3)
    stars = Collector(
        c.stub.SubscribeMessages(rpc_pb2.SubscribeMessagesRequest(types=[pb.MESSAGE_TYPE_LINK_ADD], from_block=1)), 1
    )
    only_p1.start()
    stars.start()
    c.commit(alice.b.project_metadata(p2, pb.PROJECT_FIELD_WEBSITE, "https://two.test"))
    c.commit(alice.b.project_metadata(p1, pb.PROJECT_FIELD_WEBSITE, "https://one.test"))
    c.commit(alice.b.star(p1))
    assert only_p1.done.wait(30) and stars.done.wait(30)
    assert [e.message.message.data.type for e in only_p1.items] == [
        pb.MESSAGE_TYPE_PROJECT_CREATE,
        pb.MESSAGE_TYPE_PROJECT_METADATA,
        pb.MESSAGE_TYPE_LINK_ADD,
    ]
    assert [e.message.message.data.type for e in stars.items] == [pb.MESSAGE_TYPE_LINK_ADD]
    height = c.stub.GetNodeStatus(rpc_pb2.GetNodeStatusRequest()).status.block_height
    blocks = Collector(c.stub.SubscribeBlocks(rpc_pb2.SubscribeBlocksRequest(from_block=2)), height - 1 + 2)
    blocks.start()
    c.commit(alice.b.account_data(pb.ACCOUNT_FIELD_BIO, "more"))
    assert blocks.done.wait(30)
    numbers = [b.block.header.number for b in blocks.items]
    assert numbers == list(range(2, 2 + len(numbers)))
    assert [b.event_id for b in blocks.items] == numbers
