"""The node's Prometheus endpoint after a short workload against a real chain-node process: every metric
is served, with the values the workload implies (counted here from what the test itself sent)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
import requests
from google.protobuf.message import Message

from chain.v1 import rpc_pb2, service_pb2_grpc
from tests.fixtures.actors import new_account
from tests.fixtures.etcdproc import EtcdCluster
from tests.fixtures.nodeproc import NodeProcess
from tests.fixtures.replicaset import ReplicaSet, leader_index
from tests.fixtures.scrape import Samples, value
from tests.fixtures.scrape import scrape as scrape_port

SUBMIT = "SubmitMessage"
OK, INVALID_ARGUMENT, ALREADY_EXISTS = 0, 3, 6


def scrape(node: NodeProcess) -> Samples:
    """The node's samples (its metrics port is in its ready line)."""
    port = node.ready["metrics_port"]
    assert port, node.ready
    return scrape_port(port)


def grpc_web(node: NodeProcess, method: str, request: Message) -> str:
    """One unary gRPC-web call (binary mode); its grpc-status."""
    body = request.SerializeToString()
    resp = requests.post(
        f"{node.web_url}/chain.v1.ChainService/{method}",
        data=b"\x00" + len(body).to_bytes(4, "big") + body,
        headers={"Content-Type": "application/grpc-web+proto"},
        timeout=10,
    )
    assert resp.status_code == 200
    if "grpc-status" in resp.headers:  # trailers-only
        return resp.headers["grpc-status"]
    trailer = resp.content[resp.content.rindex(b"\x80") + 5 :].decode()
    return dict(line.split(":", 1) for line in trailer.strip().split("\r\n"))["grpc-status"].strip()


@pytest.fixture
def node(tmp_path: Path) -> Iterator[NodeProcess]:
    proc = NodeProcess(
        tmp_path / "node",
        "--block-interval", "0.5", "--empty-block-interval", "3600", "--subscriber-queue", "1",
    ).start()  # fmt: skip
    try:
        yield proc
    finally:
        proc.stop()


def test_metrics_after_a_workload(node: NodeProcess):
    c = node.client()
    stub = service_pb2_grpc.ChainServiceStub(c.channel)
    # a blocks subscriber read all along (stays open), and a messages subscriber never read: with a queue
    # of one item, the first block of two messages drops it
    blocks = stub.SubscribeBlocks(rpc_pb2.SubscribeBlocksRequest())
    seen: list[int] = []

    def read() -> None:
        try:
            for b in blocks:
                seen.append(b.event_id)
        except grpc.RpcError:
            pass  # cancelled at the end

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    slow = stub.SubscribeMessages(rpc_pb2.SubscribeMessagesRequest())
    time.sleep(0.3)

    actor = new_account(c, node.authority(), units=1)  # one batch of two messages, committed
    with pytest.raises(grpc.RpcError) as dropped:
        list(slow)
    assert dropped.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED

    follows = [actor.b.follow(bytes([i]) * 20) for i in range(1, 6)]
    for msg in follows:
        stub.SubmitMessage(rpc_pb2.SubmitMessageRequest(message=msg))
    with pytest.raises(grpc.RpcError) as duplicate:  # still pending: the block interval is 0.5 s
        stub.SubmitMessage(rpc_pb2.SubmitMessageRequest(message=follows[-1]))
    assert duplicate.value.code() == grpc.StatusCode.ALREADY_EXISTS
    forged = actor.b.follow(b"\x07" * 20)
    forged.signature = bytes(64)
    with pytest.raises(grpc.RpcError) as bad:
        stub.SubmitMessage(rpc_pb2.SubmitMessageRequest(message=forged))
    assert bad.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    raw = c.channel.unary_unary(f"/chain.v1.ChainService/{SUBMIT}", None, None)  # bytes as they are
    with pytest.raises(grpc.RpcError) as malformed:
        raw(b"\xff\xff\xff")
    assert malformed.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    for msg in follows:
        c.wait_committed(msg.hash)

    # gRPC-web on the node's own listener: one answered call, one NOT_FOUND
    assert grpc_web(node, "GetChainStats", rpc_pb2.GetChainStatsRequest()) == "0"
    assert grpc_web(node, "GetMessage", rpc_pb2.GetMessageRequest(hash=bytes(32))) == "5"

    stats = stub.GetChainStats(rpc_pb2.GetChainStatsRequest()).stats
    height = stub.GetNodeStatus(rpc_pb2.GetNodeStatusRequest()).status.block_height
    deadline = time.monotonic() + 10
    while (not seen or seen[-1] < height) and time.monotonic() < deadline:
        time.sleep(0.05)
    m = scrape(node)
    blocks.cancel()
    reader.join(5)
    c.close()

    committed = int(stats.total_messages)  # the devnet bootstrap message, the account's two, five follows
    assert committed == 8
    assert value(m, "chain_messages_committed_total") == committed
    assert value(m, "chain_blocks_committed_total", chain_block_source="local") == height  # block 0 is genesis
    assert value(m, "chain_block_height") == height
    assert value(m, "chain_block_messages_count") == height
    assert value(m, "chain_block_messages_sum") == committed
    assert value(m, "chain_block_interval_seconds_count") == height - 1
    assert 0.4 * (height - 1) <= value(m, "chain_block_interval_seconds_sum")
    assert value(m, "chain_block_apply_duration_seconds_count") == height
    assert value(m, "chain_message_commit_duration_seconds_count") == committed
    assert value(m, "chain_message_commit_duration_seconds_sum") > 0
    assert value(m, "chain_mempool_size") == 0

    assert value(m, "chain_messages_submitted_total", chain_outcome="accepted") == committed
    assert value(m, "chain_messages_submitted_total", chain_outcome="accepted", chain_message_type="LINK_ADD") == 5
    assert value(m, "chain_messages_submitted_total", chain_reason_code="DUPLICATE_MESSAGE") == 1
    assert value(m, "chain_messages_submitted_total", chain_reason_code="INVALID_SIGNATURE") == 1

    rpc = "rpc_server_duration_milliseconds_count"
    assert value(m, rpc, rpc_method=SUBMIT, rpc_grpc_status_code=OK) == 5
    assert (
        value(m, rpc, rpc_method=SUBMIT, rpc_grpc_status_code=ALREADY_EXISTS, chain_reason_code="DUPLICATE_MESSAGE")
        == 1
    )
    assert value(m, rpc, rpc_method=SUBMIT, rpc_grpc_status_code=INVALID_ARGUMENT) == 2
    assert value(m, rpc, rpc_method=SUBMIT, chain_reason_code="INVALID_SIGNATURE") == 1
    assert value(m, rpc, rpc_method=SUBMIT, chain_reason_code="MALFORMED_MESSAGE") == 1
    assert value(m, rpc, rpc_method="BatchSubmitMessages", rpc_grpc_status_code=OK) == 1
    native = {"rpc_service": "chain.v1.ChainService", "rpc_system": "grpc", "chain_transport": "grpc"}
    assert value(m, rpc, rpc_method="GetChainStats", **native) == 1
    web = {"rpc_service": "chain.v1.ChainService", "rpc_system": "grpc", "chain_transport": "grpc-web"}
    assert value(m, rpc, rpc_method="GetChainStats", rpc_grpc_status_code=OK, **web) == 1
    assert value(m, rpc, rpc_method="GetMessage", rpc_grpc_status_code=5, chain_reason_code="NOT_FOUND", **web) == 1
    assert value(m, rpc, chain_transport="grpc-web") == 2
    assert value(m, rpc, rpc_method="SubscribeMessages", rpc_grpc_status_code=8) == 1  # RESOURCE_EXHAUSTED

    assert value(m, "chain_stream_subscribers") == 1  # the blocks stream, still open
    assert value(m, "chain_stream_subscribers_dropped_total") == 1
    assert value(m, "chain_etcd_leader_changes_total") == 0  # solo: no elections
    assert value(m, "chain_member_state", chain_member_state="SERVING") == 1  # one state at a time
    assert value(m, "chain_member_state") == 1 and len(m["chain_member_state"]) == 7


def test_metrics_port_flag_and_off(tmp_path: Path):
    off = NodeProcess(tmp_path / "off", "--metrics-addr", "", "--web-addr", "").start()
    try:
        assert off.ready["metrics_port"] == 0
    finally:
        off.stop()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        addr = f"127.0.0.1:{taken.getsockname()[1]}"
        clash = NodeProcess(tmp_path / "clash", "--metrics-addr", addr, "--web-addr", "")
        with pytest.raises(RuntimeError, match=f"metrics address {addr}: Address already in use"):
            clash.start()
        clash.stop()
        assert not (tmp_path / "clash" / "data.mdb").exists()  # refused before the store was created
    bad = NodeProcess(tmp_path / "bad", "--metrics-addr", "nowhere", "--web-addr", "")
    with pytest.raises(RuntimeError, match="--metrics-addr: not a host:port address"):
        bad.start()
    bad.stop()


def test_leader_changes_are_counted_on_etcd(tmp_path: Path):
    etcd = EtcdCluster(tmp_path / "etcd", 1).start()
    nodes = ReplicaSet(tmp_path, etcd).start(2)
    try:
        first = leader_index(nodes)
        other = nodes.nodes[1 - first]
        deadline = time.monotonic() + 10
        while value(scrape(other), "chain_etcd_leader_changes_total") < 1 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert value(scrape(other), "chain_etcd_leader_changes_total") == 1
        nodes.nodes[first].stop()  # a clean stop revokes its lease: the other member takes over
        assert leader_index(nodes) == 1 - first
        while value(scrape(other), "chain_etcd_leader_changes_total") < 2 and time.monotonic() < deadline + 10:
            time.sleep(0.1)
        assert value(scrape(other), "chain_etcd_leader_changes_total") == 2
    finally:
        nodes.stop()
        etcd.stop()
