"""Canonical encoding, hashing and envelope checks of signed messages.

`data_bytes` is the deterministic protobuf encoding of `MessageData` with no
unknown fields; `hash = BLAKE3-256(data_bytes)`; `signature = Ed25519(signer,
hash)`. A node re-encodes `data` itself and rejects a `data_bytes` or a `hash`
that differs from what it computes.
"""

from __future__ import annotations

from blake3 import blake3
from google.protobuf.message import DecodeError

from chain.v1 import message_pb2 as pb
from node.constants import ED25519_KEY_LEN, ED25519_SIG_LEN, HASH_LEN, MAX_MESSAGE_BYTES
from node.crypto.ed25519 import Ed25519Verifier
from node.errors import MessageRejected, Reason


def blake3_256(data: bytes) -> bytes:
    return blake3(data).digest()


def encode_data(data: pb.MessageData) -> bytes:
    return data.SerializeToString(deterministic=True)


def message_hash(data: pb.MessageData) -> bytes:
    return blake3_256(encode_data(data))


def parse_message(raw: bytes, max_bytes: int = MAX_MESSAGE_BYTES) -> pb.Message:
    """Decode a wire message, rejecting oversize and malformed input."""
    if len(raw) > max_bytes:
        raise MessageRejected(Reason.MESSAGE_TOO_LARGE, f"{len(raw)} bytes > {max_bytes}", size=len(raw))
    msg = pb.Message()
    try:
        msg.ParseFromString(raw)
    except DecodeError as exc:
        raise MessageRejected(Reason.MALFORMED_MESSAGE, f"not a Message: {exc}") from None
    return msg


def check_hash(msg: pb.Message, max_bytes: int = MAX_MESSAGE_BYTES) -> bytes:
    """Re-encode `data` and check data_bytes and hash; returns the canonical bytes."""
    if not msg.HasField("data"):
        raise MessageRejected(Reason.MALFORMED_MESSAGE, "message has no data")
    data = pb.MessageData()
    data.CopyFrom(msg.data)
    data.DiscardUnknownFields()
    canonical = encode_data(data)
    if len(canonical) > max_bytes:
        raise MessageRejected(Reason.MESSAGE_TOO_LARGE, f"data is {len(canonical)} bytes > {max_bytes}")
    if msg.data_bytes and msg.data_bytes != canonical:
        raise MessageRejected(Reason.DATA_BYTES_MISMATCH, "data_bytes is not the canonical encoding of data")
    if canonical != encode_data(msg.data):
        raise MessageRejected(Reason.MALFORMED_MESSAGE, "data carries unknown fields")
    digest = blake3_256(canonical)
    if len(msg.hash) != HASH_LEN or msg.hash != digest:
        raise MessageRejected(
            Reason.HASH_MISMATCH, "hash is not BLAKE3(data_bytes)", expected=digest.hex(), got=msg.hash.hex()
        )
    return canonical


def check_envelope(msg: pb.Message, verifier: Ed25519Verifier, max_bytes: int = MAX_MESSAGE_BYTES) -> bytes:
    """Hash and Ed25519 signature checks; returns the message hash."""
    check_hash(msg, max_bytes)
    if len(msg.signer) != ED25519_KEY_LEN or len(msg.signature) != ED25519_SIG_LEN:
        raise MessageRejected(Reason.INVALID_SIGNATURE, "signer must be 32 bytes and signature 64 bytes")
    if not verifier.verify(msg.signer, msg.hash, msg.signature):
        raise MessageRejected(Reason.INVALID_SIGNATURE, "Ed25519 signature does not verify")
    return bytes(msg.hash)
