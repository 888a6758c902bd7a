"""Block format: header hash, message root, transaction chunks, genesis."""

from __future__ import annotations

from collections.abc import Sequence

from chain.v1 import block_pb2
from chain.v1 import message_pb2 as pb
from node.codec import blake3_256
from node.constants import HASH_LEN, MESSAGES_PER_CHUNK, PROTOCOL_VERSION
from node.merkle import EMPTY
from node.params import ChainParams

ZERO_HASH = bytes(HASH_LEN)


def header_hash(header: block_pb2.BlockHeader) -> bytes:
    return blake3_256(b"\x02" + header.SerializeToString(deterministic=True))


def message_root(hashes: Sequence[bytes]) -> bytes:
    """Binary BLAKE3 Merkle root over message hashes in order (an odd node is promoted)."""
    if not hashes:
        return ZERO_HASH
    level = list(hashes)
    while len(level) > 1:
        nxt = [blake3_256(b"\x01" + level[i] + level[i + 1]) for i in range(0, len(level) - 1, 2)]
        if len(level) % 2:
            nxt.append(level[-1])
        level = nxt
    return level[0]


def chunk_hash(messages: Sequence[pb.Message]) -> bytes:
    return blake3_256(b"".join(m.hash for m in messages))


def chunk_hashes(messages: Sequence[pb.Message]) -> list[bytes]:
    """The hash of each chunk of `messages` (MESSAGES_PER_CHUNK a chunk), without building the chunks."""
    return [chunk_hash(messages[i : i + MESSAGES_PER_CHUNK]) for i in range(0, len(messages), MESSAGES_PER_CHUNK)]


def make_chunks(messages: Sequence[pb.Message]) -> list[block_pb2.TransactionChunk]:
    chunks = []
    for index, start in enumerate(range(0, len(messages), MESSAGES_PER_CHUNK)):
        part = messages[start : start + MESSAGES_PER_CHUNK]
        chunks.append(block_pb2.TransactionChunk(index=index, messages=part, chunk_hash=chunk_hash(part)))
    return chunks


def fill_chunks(block: block_pb2.Block, messages: Sequence[pb.Message], hashes: Sequence[bytes]) -> None:
    """Add `messages` to `block` as its chunks (of `hashes`, from `chunk_hashes`), each message copied once:
    the same block as `Block(chunks=make_chunks(messages))`, without copying every message twice."""
    for index, start in enumerate(range(0, len(messages), MESSAGES_PER_CHUNK)):
        block.chunks.add(index=index, messages=messages[start : start + MESSAGES_PER_CHUNK], chunk_hash=hashes[index])


def block_messages(block: block_pb2.Block) -> list[pb.Message]:
    return [m for chunk in block.chunks for m in chunk.messages]


def genesis_block(params: ChainParams) -> block_pb2.Block:
    header = block_pb2.BlockHeader(
        number=0,
        parent_hash=ZERO_HASH,
        timestamp_ms=params.genesis_time_ms,
        state_root=EMPTY,
        message_root=ZERO_HASH,
        message_count=0,
        network=params.network,
        protocol_version=PROTOCOL_VERSION,
    )
    return block_pb2.Block(header=header, hash=header_hash(header))
