"""The chain's own records (store format 3): each committed message stored once, in commit order.

    put_message(overlay, record)               # its event record and its hash index entry
    block_value(block, first_event_id)         # what the block's record holds
    read_message(view, hash) / read_block(view, number) / event_record(view, value) / block_shell(raw)

What only grows is appended in sequence (docs/state.md, "What each table costs per message"):

- `62` event id -> the `CommittedMessage` (the message, its block, index and event id): appended in commit
  order, so a block's messages are one run of consecutive keys;
- `61` message hash -> its event id (u64): the one index by hash, 8 bytes a message;
- `60` block number -> `COMPACT`, the block's first event id (u64), then the block without its messages
  (header and hash): the messages are the events first..first+count-1, put back into their chunks on read
  (`MESSAGES_PER_CHUNK` a chunk, with the header's chunk hashes: the block as it was sealed).

Stores of formats 1 and 2 hold the message record under its hash, the hash under its event id and the whole
block under its number. Those records stay as they were written and are read as they are: every reader here
tells the two forms apart (a hash index value of 8 bytes, an event value that is not a 32-byte hash, a block
value that starts with `COMPACT`, which no encoded `Block` does), so a store opened by this release serves its
old blocks and writes its new ones in format 3, with nothing migrated.
"""

from __future__ import annotations

from typing import Final

from chain.v1 import block_pb2
from node.constants import MESSAGES_PER_CHUNK
from node.storage import schema
from node.storage.kv import Overlay, ReadView
from node.storage.varint import put_varint, read_varint

COMPACT: Final = b"\x00"  # a block record of format 3 (an encoded Block starts with a field tag, never 0)
EVENT_ID_LEN: Final = 8
HASH_LEN: Final = 32


def encode(record: block_pb2.Block | block_pb2.CommittedMessage) -> bytes:
    return record.SerializeToString(deterministic=True)


def decode_block(raw: bytes) -> block_pb2.Block:
    return block_pb2.Block.FromString(raw)


def decode_record(raw: bytes) -> block_pb2.CommittedMessage:
    return block_pb2.CommittedMessage.FromString(raw)


def put_message(overlay: Overlay, record: block_pb2.CommittedMessage) -> None:
    """A committed message's records: the message under its event id, its event id under its hash."""
    overlay.put(schema.event_key(record.event_id), encode(record))
    overlay.put(schema.message_key(record.message.hash), schema.u64(record.event_id))


def block_value(block: block_pb2.Block, first_event_id: int) -> bytes:
    """The block's record: its header and hash, and where its messages start among the events."""
    return COMPACT + schema.u64(first_event_id) + encode(block_pb2.Block(header=block.header, hash=block.hash))


def block_shell(raw: bytes) -> block_pb2.Block:
    """The block of a record, header and hash only (of either format; the messages are not read)."""
    if raw[:1] == COMPACT:
        return decode_block(raw[1 + EVENT_ID_LEN :])
    block = decode_block(raw)
    del block.chunks[:]
    return block


def block_of(view: ReadView, raw: bytes, *, messages: bool = True) -> block_pb2.Block:
    """The block of a record, with its chunks when `messages` (read from the events in format 3)."""
    if raw[:1] != COMPACT:
        block = decode_block(raw)
        if not messages:
            del block.chunks[:]
        return block
    shell = raw[1 + EVENT_ID_LEN :]
    block = decode_block(shell)
    count = int(block.header.message_count)
    if not messages or not count:
        return block
    first = int.from_bytes(raw[1 : 1 + EVENT_ID_LEN], "big")
    found: list[bytes] = []
    for _key, value in view.scan(schema.events_prefix(), schema.event_key(first)):
        found.append(_message_bytes(value))
        if len(found) == count:
            break
    # the chunks as their encoding (Block field 3: index, messages, chunk_hash), parsed once with the shell:
    # one parse of the whole block instead of a record decoded and a message copied per message
    hashes = block.header.chunk_hashes
    chunks = [
        _chunk(index, found[start : start + MESSAGES_PER_CHUNK], bytes(hashes[index]))
        for index, start in enumerate(range(0, len(found), MESSAGES_PER_CHUNK))
    ]
    return decode_block(shell + b"".join(chunks))


def _message_bytes(record: bytes) -> bytes:
    """The encoded Message inside an encoded CommittedMessage (its field 1, which a deterministic encoding
    writes first)."""
    if record[:1] == b"\x0a":
        try:
            length, at = read_varint(record, 1)
        except ValueError:
            length, at = -1, 0
        if length >= 0 and at + length <= len(record):
            return record[at : at + length]
    return decode_record(record).message.SerializeToString(deterministic=True)


def _chunk(index: int, messages: list[bytes], chunk_hash: bytes) -> bytes:
    body = bytearray()
    if index:
        body.append(0x08)
        put_varint(body, index)
    for m in messages:
        body.append(0x12)
        put_varint(body, len(m))
        body += m
    body.append(0x1A)
    put_varint(body, len(chunk_hash))
    body += chunk_hash
    out = bytearray([0x1A])
    put_varint(out, len(body))
    return bytes(out + body)


def read_block(view: ReadView, number: int, *, messages: bool = True) -> block_pb2.Block | None:
    raw = view.get(schema.block_key(number))
    return None if raw is None else block_of(view, raw, messages=messages)


def read_message(view: ReadView, message_hash: bytes) -> block_pb2.CommittedMessage | None:
    """A committed message's record by its hash (None: not committed)."""
    raw = view.get(schema.message_key(message_hash))
    if raw is None:
        return None
    if len(raw) == EVENT_ID_LEN:
        raw = view.get(schema.event_key(int.from_bytes(raw, "big")))
        if raw is None:
            return None
    return decode_record(raw)


def event_record(view: ReadView, value: bytes) -> block_pb2.CommittedMessage | None:
    """The record of an event, from the event table's value (format 3: the record; before: its hash)."""
    if len(value) == HASH_LEN:
        return read_message(view, value)
    return decode_record(value)
