"""Events as the gateway carries them: an ordered key, the node's event id, filter fields, the protobuf.

Every event has a key `<block>-<index>`: a message's block number and its index in the block, a block's
number and 0. Keys order events in commit order; they are the SSE `id:` and the Redis Stream entry id.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import StrEnum
from functools import cached_property
from typing import Final

from chain.v1 import block_pb2
from gateway.errors import error_body
from gateway.rest.shapes import to_json
from node.state.kinds import project_of

MAX_INDEX: Final = 2**32 - 1  # above every message index (uint32): "after all of this block"


class Kind(StrEnum):
    MESSAGES = "messages"
    BLOCKS = "blocks"

    @property
    def sse_event(self) -> str:
        return "message" if self is Kind.MESSAGES else "block"


@dataclass(frozen=True, order=True)
class EventKey:
    block: int
    index: int

    def __str__(self) -> str:
        return f"{self.block}-{self.index}"

    @classmethod
    def parse(cls, text: str) -> EventKey:
        """`<block>-<index>`; ValueError when malformed."""
        block, _, index = text.strip().partition("-")
        if not (block.isascii() and block.isdigit() and index.isascii() and index.isdigit()):
            raise ValueError(f"not an event id (<block>-<index>): {text!r}")
        key = cls(int(block), int(index))
        if key.block >= 2**64 or key.index > MAX_INDEX:
            raise ValueError(f"event id out of range: {text!r}")
        return key

    @classmethod
    def after_block(cls, block: int) -> EventKey:
        """The position just after every event of `block`."""
        return cls(block, MAX_INDEX)


def start_position(kind: Kind, block: int) -> EventKey:
    """The position just after every event of blocks up to `block`."""
    return EventKey.after_block(block) if kind is Kind.MESSAGES else EventKey(block, 0)


@dataclass(frozen=True, eq=False)
class Event:
    kind: Kind
    key: EventKey
    event_id: int  # the node's: messages count from 1 in commit order; a block's is its number
    type: int  # MessageType value; 0 for blocks
    project: bytes  # the project a message acts on, b"" when none (and for blocks)
    payload: bytes  # serialized CommittedMessage, or Block without chunks

    @classmethod
    def from_message(cls, m: block_pb2.CommittedMessage) -> Event:
        return cls(
            Kind.MESSAGES,
            EventKey(int(m.block_number), int(m.index)),
            int(m.event_id),
            int(m.message.data.type),
            project_of(m.message.data, bytes(m.message.hash)),
            m.SerializeToString(deterministic=True),
        )

    @classmethod
    def from_block(cls, block: block_pb2.Block) -> Event:
        if block.chunks:
            headers_only = block_pb2.Block()
            headers_only.CopyFrom(block)
            del headers_only.chunks[:]
            block = headers_only
        number = int(block.header.number)
        return cls(Kind.BLOCKS, EventKey(number, 0), number, 0, b"", block.SerializeToString(deterministic=True))

    def decode(self) -> block_pb2.CommittedMessage | block_pb2.Block:
        if self.kind is Kind.MESSAGES:
            return block_pb2.CommittedMessage.FromString(self.payload)
        return block_pb2.Block.FromString(self.payload)

    @cached_property
    def frame(self) -> bytes:
        """The SSE frame, encoded once per event and shared by every client that receives it."""
        data = json.dumps(to_json(self.decode()), separators=(",", ":"), ensure_ascii=False)
        return f"id: {self.key}\nevent: {self.kind.sse_event}\ndata: {data}\n\n".encode()

    @cached_property
    def chunk(self) -> bytes:
        """The frame as one HTTP/1.1 chunk, for writing straight to a chunked response's transport."""
        return http_chunk(self.frame)


PING: Final = b": ping\n\n"


def http_chunk(data: bytes) -> bytes:
    """`data` framed as one chunk of HTTP/1.1 chunked transfer coding."""
    return b"%x\r\n%b\r\n" % (len(data), data)


def error_frame(code: str, message: str, **details: str) -> bytes:
    """A final `event: error` (no `id:`, so the client's Last-Event-ID stays on the last delivered event)."""
    body = error_body(code, message, details)
    return f"event: error\ndata: {json.dumps(body, separators=(',', ':'))}\n\n".encode()
