"""The gRPC-web wire format: content types, frames, trailers and metadata as HTTP/1.1 headers.

Pure functions over bytes and strings, no I/O. The transport (`node.grpcweb.server`) reads a request body,
decodes it here, and encodes every frame it writes here.

Facts from the gRPC-web protocol (PROTOCOL-WEB.md in the gRPC repository):

- A body is a sequence of frames: one flag byte (0x00 data, 0x80 trailers; bit 0x01 = compressed) and a
  4-byte big-endian length, then the payload.
- The trailers frame carries `name: value\\r\\n` lines, the same encoding as HTTP/1.1 header lines.
- In text mode (`application/grpc-web-text`) the body is base64; a client may send several padded base64
  chunks back to back, and this server base64-encodes each response frame on its own.
"""

from __future__ import annotations

import base64
import binascii
import enum
import re
import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from types import MappingProxyType
from typing import NamedTuple

import grpc

DATA_FLAG = 0x00
TRAILERS_FLAG = 0x80
COMPRESSED_FLAG = 0x01
FRAME_HEADER = struct.Struct(">BI")

MetadataValue = str | bytes
Metadata = tuple[tuple[str, MetadataValue], ...]


class Mode(enum.Enum):
    """Body encoding, chosen by the request's content type; the response uses the same one."""

    BINARY = "binary"
    TEXT = "text"


_CONTENT_TYPES: MappingProxyType[str, Mode] = MappingProxyType(
    {
        "application/grpc-web": Mode.BINARY,
        "application/grpc-web+proto": Mode.BINARY,
        "application/grpc-web-text": Mode.TEXT,
        "application/grpc-web-text+proto": Mode.TEXT,
    }
)


def parse_content_type(value: str | None) -> tuple[Mode, str] | None:
    """The mode and the bare media type to answer with, or None when the content type is not supported.

    `+json` and other codecs are not supported: the servicers' serializers speak protobuf only.
    """
    if value is None:
        return None
    media = value.split(";", 1)[0].strip().lower()
    mode = _CONTENT_TYPES.get(media)
    return None if mode is None else (mode, media)


class ProtocolError(Exception):
    """A request body that breaks the framing rules; carries the gRPC status to answer with."""

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


# --- frames -------------------------------------------------------------------------------------------------


def encode_frame(flag: int, payload: bytes, mode: Mode) -> bytes:
    """One frame, base64-encoded on its own in text mode."""
    frame = FRAME_HEADER.pack(flag, len(payload)) + payload
    return base64.b64encode(frame) if mode is Mode.TEXT else frame


def decode_text_body(body: bytes) -> bytes:
    """Decode a text-mode body: base64, possibly several padded chunks back to back.

    ASCII whitespace is ignored. A chunk ends after its `=` padding; the last chunk may be unpadded.
    """
    compact = re.sub(rb"\s+", b"", body)
    out = bytearray()
    for chunk in re.findall(rb"[^=]*=*", compact):
        if not chunk:
            continue
        padded = chunk + b"=" * (-len(chunk) % 4)
        try:
            out += base64.b64decode(padded, validate=True)
        except binascii.Error as exc:
            raise ProtocolError(grpc.StatusCode.INTERNAL, f"malformed grpc-web-text body: {exc}") from exc
    return bytes(out)


def iter_frames(body: bytes, max_length: int | None = None) -> Iterator[tuple[int, bytes]]:
    """Split a decoded body into (flag, payload) frames; a truncated frame is a protocol error.

    A frame that declares more than `max_length` bytes is refused before its length is checked against
    the body, so the answer to an oversize message is RESOURCE_EXHAUSTED however much of it arrived.
    """
    offset = 0
    while offset < len(body):
        if len(body) - offset < FRAME_HEADER.size:
            raise ProtocolError(grpc.StatusCode.INTERNAL, "truncated grpc-web frame header")
        flag, length = FRAME_HEADER.unpack_from(body, offset)
        offset += FRAME_HEADER.size
        if max_length is not None and length > max_length:
            raise ProtocolError(
                grpc.StatusCode.RESOURCE_EXHAUSTED, f"received message larger than max ({length} vs. {max_length})"
            )
        if len(body) - offset < length:
            raise ProtocolError(grpc.StatusCode.INTERNAL, "truncated grpc-web frame")
        yield flag, body[offset : offset + length]
        offset += length


def all_request_messages(body: bytes, max_message_size: int) -> list[bytes]:
    """Every data frame of a decoded request body, in order (a half-duplex client stream sends several)."""
    messages: list[bytes] = []
    for flag, payload in iter_frames(body, max_message_size):
        if flag & COMPRESSED_FLAG:
            raise ProtocolError(grpc.StatusCode.UNIMPLEMENTED, "compressed grpc-web messages are not supported")
        if flag & TRAILERS_FLAG:
            continue  # a client has nothing to say in trailers; tolerated and ignored
        messages.append(payload)
    return messages


def single_request_message(body: bytes, max_message_size: int) -> bytes:
    """The one data frame of a unary or server-streaming request."""
    messages = all_request_messages(body, max_message_size)
    if len(messages) != 1:
        raise ProtocolError(grpc.StatusCode.INTERNAL, f"expected one request message, got {len(messages)}")
    return messages[0]


def request_message(body: bytes, mode: Mode, max_message_size: int) -> bytes:
    """The one request message of a whole request body as it arrived (base64 in text mode)."""
    return single_request_message(decode_text_body(body) if mode is Mode.TEXT else body, max_message_size)


def request_messages(body: bytes, mode: Mode, max_message_size: int) -> list[bytes]:
    """Every request message of a whole request body as it arrived (base64 in text mode)."""
    return all_request_messages(decode_text_body(body) if mode is Mode.TEXT else body, max_message_size)


# --- status and metadata ------------------------------------------------------------------------------------


def percent_encode(message: str) -> str:
    """`grpc-message` encoding: UTF-8, bytes outside printable ASCII and `%` itself as %XX."""
    return "".join(
        chr(b) if 0x20 <= b <= 0x7E and b != 0x25 else f"%{b:02X}" for b in message.encode("utf-8", "replace")
    )


_TIMEOUT = re.compile(r"^(\d{1,8})([HMSmun])$")
_TIMEOUT_UNITS = MappingProxyType({"H": 3600.0, "M": 60.0, "S": 1.0, "m": 1e-3, "u": 1e-6, "n": 1e-9})


def parse_timeout(value: str) -> float:
    """`grpc-timeout` (e.g. `100m`, `5S`) in seconds; ValueError when malformed."""
    match = _TIMEOUT.match(value.strip())
    if match is None:
        raise ValueError(f"malformed grpc-timeout {value!r}")
    return int(match.group(1)) * _TIMEOUT_UNITS[match.group(2)]


_KEY = re.compile(r"^[0-9a-z_.\-]+$")
# Names a servicer may not set: the status (written by the transport), and anything HTTP/1.1 or CORS owns.
_RESERVED = frozenset(
    {
        "grpc-status",
        "grpc-message",
        "content-type",
        "content-length",
        "content-encoding",
        "transfer-encoding",
        "connection",
        "keep-alive",
        "te",
        "trailer",
        "upgrade",
        "host",
        "vary",
    }
)


def valid_metadata_key(key: str) -> bool:
    """Whether `key` may name metadata: lowercase letters, digits, `_`, `.` and `-`."""
    return _KEY.match(key) is not None


def printable(text: str) -> bool:
    """Whether a text metadata value is printable ASCII, as a header line must be."""
    return all(0x20 <= ord(c) <= 0x7E for c in text)


@dataclass(frozen=True)
class HeaderLine:
    name: str
    value: str


def metadata_to_headers(metadata: Iterable[tuple[str, MetadataValue]]) -> tuple[list[HeaderLine], list[str]]:
    """Encode metadata as header lines; returns (lines, rejected keys).

    `-bin` values are base64 (unpadded, as the gRPC spec asks senders to emit); other values must be
    printable ASCII. Reserved or invalid entries are rejected (the caller logs them), never sent, so a
    servicer can neither break the framing nor inject header lines.
    """
    lines: list[HeaderLine] = []
    rejected: list[str] = []
    for raw_key, value in metadata:
        key = raw_key.lower()
        if not valid_metadata_key(key) or key in _RESERVED or key.startswith("access-control-"):
            rejected.append(raw_key)
            continue
        if key.endswith("-bin"):
            data = value.encode("utf-8") if isinstance(value, str) else bytes(value)
            lines.append(HeaderLine(key, base64.b64encode(data).rstrip(b"=").decode("ascii")))
            continue
        text = value.decode("latin-1") if isinstance(value, bytes) else value
        if not printable(text):
            rejected.append(raw_key)
            continue
        lines.append(HeaderLine(key, text))
    return lines, rejected


def status_lines(code: grpc.StatusCode, message: str) -> list[HeaderLine]:
    lines = [HeaderLine("grpc-status", str(code.value[0]))]
    if message:
        lines.append(HeaderLine("grpc-message", percent_encode(message)))
    return lines


def encode_trailers(lines: Iterable[HeaderLine]) -> bytes:
    return "".join(f"{line.name}: {line.value}\r\n" for line in lines).encode("ascii")


# Headers that describe the HTTP/1.1 hop or the gRPC-web framing rather than the call: never metadata.
_NOT_METADATA = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-connection",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
        "content-type",
        "expect",
        "accept",
        "accept-encoding",
        "grpc-timeout",
        "grpc-encoding",
        "grpc-accept-encoding",
        "x-grpc-web",
    }
)


class Metadatum(NamedTuple):
    """One invocation metadata entry, shaped like grpc.aio's (`.key`, `.value`, and a 2-tuple)."""

    key: str
    value: MetadataValue


def headers_to_metadata(headers: Iterable[tuple[str, str]]) -> tuple[Metadatum, ...]:
    """Invocation metadata from request headers: lowercase keys, `-bin` values decoded to bytes.

    A `-bin` header may hold several comma-separated values (HTTP/1.1 folding); each becomes an entry.
    Undecodable `-bin` values are skipped.
    """
    out: list[Metadatum] = []
    for raw_key, value in headers:
        key = raw_key.lower()
        if key in _NOT_METADATA or key.startswith(":"):
            continue
        if not key.endswith("-bin"):
            out.append(Metadatum(key, value))
            continue
        for raw_part in value.split(","):
            part = raw_part.strip()
            try:
                out.append(Metadatum(key, base64.b64decode(part + "=" * (-len(part) % 4), validate=True)))
            except binascii.Error:
                continue
    return tuple(out)
