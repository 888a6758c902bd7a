"""Drain: a node shutting down ends its streams with UNAVAILABLE and reason DRAINING, not
RESOURCE_EXHAUSTED / SLOW_SUBSCRIBER, and a client resumes from its last event id with no gap; the gateway's
feed takes DRAINING as "resume on another node", without backoff."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

import grpc
import requests

from chain.v1 import rpc_pb2
from node.sdk.rpc import reason_of
from tests.fixtures.gwproc import GatewayProcess
from tests.fixtures.nodeproc import NodeProcess

FAST = ("--web-addr", "", "--empty-block-interval", "0.1", "--drain-seconds", "0.3")


def test_streams_end_with_draining_and_resume_without_a_gap(tmp_path: Path) -> None:
    node = NodeProcess(tmp_path / "data", *FAST).start()
    seen: list[int] = []
    ended: list[grpc.RpcError] = []
    client = node.client()

    def follow() -> None:
        try:
            for response in client.stub.SubscribeBlocks(rpc_pb2.SubscribeBlocksRequest(from_block=1), timeout=60):
                seen.append(int(response.event_id))
        except grpc.RpcError as err:
            ended.append(err)

    reader = threading.Thread(target=follow, daemon=True)
    reader.start()
    deadline = time.monotonic() + 30
    while len(seen) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(seen) >= 3
    node.signal(signal.SIGTERM)
    reader.join(30)
    assert node.stop() == 0
    assert ended, "the stream did not end when the node drained"
    err = ended[0]
    assert isinstance(err, grpc.Call)
    assert err.code() == grpc.StatusCode.UNAVAILABLE and reason_of(err) == "DRAINING"
    client.close()

    again = NodeProcess(tmp_path / "data", *FAST).start()  # "another node" with the same chain
    try:
        with again.client() as c:
            stream = c.stub.SubscribeBlocks(rpc_pb2.SubscribeBlocksRequest(after_event_id=seen[-1]), timeout=30)
            first = next(iter(stream))
            stream.cancel()
        assert first.event_id == seen[-1] + 1  # resumed right after the last block seen: no gap, no repeat
    finally:
        again.stop()


def test_the_gateway_feed_resumes_elsewhere_on_draining(tmp_path: Path) -> None:
    node = NodeProcess(tmp_path / "data", *FAST).start()
    gw = GatewayProcess(node.grpc_target, args=("--log-level", "info")).start()
    try:
        with requests.get(gw.url + "/v1/events/blocks", stream=True, timeout=30) as resp:
            assert resp.status_code == 200
            lines = resp.iter_lines()
            while not next(lines).startswith(b"id:"):
                pass  # the feed runs: an event came through
        node.signal(signal.SIGTERM)
        assert node.stop() == 0
        deadline = time.monotonic() + 20
        while not any("draining" in line for line in gw.stderr_lines) and time.monotonic() < deadline:
            time.sleep(0.1)
        drained = [line for line in gw.stderr_lines if "draining" in line]
        assert drained and "resuming on another node" in drained[0]
        assert not any("SLOW_SUBSCRIBER" in line or "RESOURCE_EXHAUSTED" in line for line in gw.stderr_lines)
    finally:
        gw.stop()
        node.stop()
