"""Encode once: the bytes the hub shares between clients are exactly the bytes of the per-client path.

The reference here is the frame as it was built per client before the hub shared batches: `id:`, `event:`
and one `data:` line of the REST JSON (the rule-by-rule `reference_json`, compact separators, UTF-8), and
for an HTTP/1.1 client each frame as its own chunk. Checked for every message type (the conformance
vectors) and for blocks, in memory and over real sockets against a real node: HTTP/1.1 (chunked) and
HTTP/1.0 clients, unfiltered and filtered, must receive byte for byte the reference stream.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from google.protobuf.json_format import ParseDict

from chain.v1 import block_pb2, rpc_pb2
from chain.v1 import message_pb2 as pb
from gateway.config import GatewayConfig
from gateway.events.hub import Batch
from gateway.events.model import Event, Kind
from gateway.keys import EVENTS
from gateway.rest.shapes import reference_json
from tests.fixtures.actors import RemoteActor, new_account
from tests.fixtures.events import gateway
from tests.fixtures.nodeproc import NodeProcess

VECTORS = Path(__file__).resolve().parents[1] / "conformance" / "v1" / "messages.json"


def reference_frame(event: Event) -> bytes:
    data = json.dumps(reference_json(event.decode()), separators=(",", ":"), ensure_ascii=False)
    return f"id: {event.key}\nevent: {event.kind.sse_event}\ndata: {data}\n\n".encode()


def reference_chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


def vector_events() -> list[Event]:
    vectors = json.loads(VECTORS.read_text(encoding="utf-8"))["vectors"]
    out = []
    for i, vector in enumerate(vectors):
        message = ParseDict(vector["message"], pb.Message())
        committed = block_pb2.CommittedMessage(message=message, block_number=7, index=i, event_id=100 + i)
        out.append(Event.from_message(committed))
    return out


def test_every_event_type_encodes_as_the_per_client_path_did() -> None:
    events = vector_events()
    types = {e.type for e in events}
    assert types == {v for v in pb.MessageType.values() if v != pb.MESSAGE_TYPE_UNSPECIFIED}
    block = block_pb2.Block(header=block_pb2.BlockHeader(number=7, timestamp_ms=1_800_000_000_000, message_count=3))
    block.hash = os.urandom(32)
    events.append(Event.from_block(block))
    for event in events:
        assert Batch([event]).frames == reference_frame(event), event.type
        assert Batch([event]).chunks == reference_chunk(reference_frame(event)), event.type
    batch = Batch(events)
    assert batch.frames == b"".join(reference_frame(e) for e in events)
    assert batch.chunks == b"".join(reference_chunk(reference_frame(e)) for e in events)


# ---- over real sockets ----


@pytest.fixture
def actor(node: NodeProcess) -> RemoteActor:
    with node.client() as c:
        return new_account(c, node.authority())


class RawClient:
    """An SSE client on a plain socket: every byte after the response headers, unparsed."""

    def __init__(self, port: int, path: str, version: str) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.sendall(f"GET {path} HTTP/{version}\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n".encode())
        self.buffer = b""
        self.headers = b""

    def read_headers(self) -> bytes:
        while b"\r\n\r\n" not in self.buffer:
            self._more()
        self.headers, _, self.buffer = self.buffer.partition(b"\r\n\r\n")
        return self.headers

    def read_exactly(self, n: int) -> bytes:
        while len(self.buffer) < n:
            self._more()
        return self.buffer

    def _more(self) -> None:
        self.sock.settimeout(30)
        data = self.sock.recv(65536)
        assert data, f"the stream ended after {len(self.buffer)} bytes"
        self.buffer += data


def expected(
    node: NodeProcess, committed: list[block_pb2.CommittedMessage], after_block: int
) -> tuple[list[Event], list[Event]]:
    """The messages as the node lists them, and the headers-only blocks after `after_block` up to theirs."""
    with node.client() as c:
        blocks = sorted({int(m.block_number) for m in committed})
        request = rpc_pb2.ListMessagesRequest(start_block=blocks[0], end_block=blocks[-1], page_size=200)
        listed = c.stub.ListMessages(request).messages
        hashes = {bytes(m.message.hash) for m in committed}
        messages = [Event.from_message(m) for m in listed if bytes(m.message.hash) in hashes]
        numbers = range(after_block + 1, blocks[-1] + 1)
        heads = [Event.from_block(c.stub.GetBlock(rpc_pb2.GetBlockRequest(block_number=n)).block) for n in numbers]
    return messages, heads


async def test_clients_receive_the_reference_bytes_http11_and_10(node: NodeProcess, actor: RemoteActor) -> None:
    create = actor.b.project_create(f"frames-{os.urandom(4).hex()}")
    pid = bytes(create.hash)
    meta = [actor.b.project_metadata(pid, pb.PROJECT_FIELD_DESCRIPTION, f"d{i} ünï") for i in range(3)]
    bios = [actor.b.account_data(pb.ACCOUNT_FIELD_BIO, f"bio {i}") for i in range(3)]
    config = replace(GatewayConfig(node_addrs=(node.grpc_target,)), sse_heartbeat=60.0)
    async with gateway(config) as gw:
        service = gw.app[EVENTS]
        port = gw.port
        assert port is not None
        paths = {
            "all": "/v1/events/messages",
            "bios": "/v1/events/messages?types=ACCOUNT_DATA",
            "blocks": "/v1/events/blocks",
        }
        clients: dict[tuple[str, str], RawClient] = {}
        for name, path in paths.items():
            for version in ("1.1", "1.0"):
                clients[(name, version)] = client = RawClient(port, path, version)
                head = await asyncio.to_thread(client.read_headers)
                assert b" 200 " in head.split(b"\r\n")[0]
        assert sum(len(hub) for hub in service.hubs.values()) == len(clients)
        after_block = service.hubs[Kind.BLOCKS].position.block

        def run() -> list[block_pb2.CommittedMessage]:
            with node.client() as c:
                return [*c.commit(create, *meta[:1], bios[0]), *c.commit(*meta[1:], *bios[1:])]

        committed = await asyncio.to_thread(run)
        messages, heads = await asyncio.to_thread(expected, node, committed, after_block)
        assert len(messages) == len(committed)
        by_name: dict[str, Any] = {
            "all": messages,
            "bios": [e for e in messages if e.type == pb.MESSAGE_TYPE_ACCOUNT_DATA],
            "blocks": heads,
        }
        for (name, version), client in clients.items():
            frames = [reference_frame(e) for e in by_name[name]]
            retry = b"retry: 1000\n\n"
            if version == "1.1":
                want = reference_chunk(retry) + b"".join(reference_chunk(f) for f in frames)
            else:
                want = retry + b"".join(frames)
            got = await asyncio.to_thread(client.read_exactly, len(want))
            assert got[: len(want)] == want, (name, version)
        for client in clients.values():
            client.sock.close()
