"""The Redis layout of the event fan-out.

    chain:messages         stream; entry id = <block>-<index> of the message
    chain:blocks           stream; entry id = <block>-0
    chain:<kind>:origin    string; the block after which the relays started the stream (set once, NX)

Entry fields: `event_id` (the node's event id, decimal), `type` (MessageType number, 0 for blocks),
`project` (hex of the message's project, "" when none), `pb` (the serialized CommittedMessage, or the Block
without its chunks). Streams are trimmed with `MAXLEN ~ redis_stream_maxlen` on every append.

Redis refuses an explicit id that is not larger than the stream's last, so relays racing on the same
events write each one once: the refusal means "already written".
"""

from __future__ import annotations

import logging
from types import MappingProxyType
from typing import Any, Final

from redis.asyncio import Redis
from redis.exceptions import ResponseError
from redis.typing import EncodableT, FieldT

from gateway.events.model import Event, EventKey, Kind, start_position

log = logging.getLogger(__name__)

STREAMS: Final = MappingProxyType({Kind.MESSAGES: "chain:messages", Kind.BLOCKS: "chain:blocks"})


def stream_name(kind: Kind) -> str:
    return STREAMS[kind]


def origin_key(kind: Kind) -> str:
    return STREAMS[kind] + ":origin"


def _text(v: bytes | str) -> str:
    return v.decode() if isinstance(v, bytes) else v


def _bytes(v: bytes | str) -> bytes:
    return v if isinstance(v, bytes) else v.encode()


def encode_fields(event: Event) -> dict[FieldT, EncodableT]:
    return {"event_id": event.event_id, "type": event.type, "project": event.project.hex(), "pb": event.payload}


def decode_entry(kind: Kind, entry_id: bytes | str, fields: dict[bytes | str, bytes | str]) -> Event:
    f = {_text(k): v for k, v in fields.items()}
    return Event(
        kind,
        EventKey.parse(_text(entry_id)),
        int(_text(f["event_id"])),
        int(_text(f["type"])),
        bytes.fromhex(_text(f["project"])),
        _bytes(f["pb"]),
    )


def _is_refused_id(err: ResponseError) -> bool:
    text = str(err)
    return "equal or smaller" in text or "greater than 0-0" in text


class RedisStreams:
    def __init__(self, client: Redis, maxlen: int) -> None:
        self.client = client
        self.maxlen = maxlen

    async def append(self, events: list[Event]) -> int:
        """XADD each event with its key as the explicit id, in one round trip; how many were new (an id
        Redis refuses as not larger than the stream's last was already written, by this or another relay)."""
        if not events:
            return 0
        pipe = self.client.pipeline(transaction=False)
        for event in events:
            pipe.xadd(
                stream_name(event.kind), encode_fields(event), id=str(event.key), maxlen=self.maxlen, approximate=True
            )
        written = 0
        for result in await pipe.execute(raise_on_error=False):
            if isinstance(result, ResponseError) and _is_refused_id(result):
                continue
            if isinstance(result, Exception):
                raise result
            written += 1
        return written

    async def last(self, kind: Kind) -> Event | None:
        entries = await self.client.xrevrange(stream_name(kind), "+", "-", count=1)
        return self._events(kind, entries or [])[-1] if entries else None

    async def origin(self, kind: Kind) -> int | None:
        raw = await self.client.get(origin_key(kind))
        return None if raw is None else int(_text(raw))

    async def claim_origin(self, kind: Kind, block: int) -> int:
        """Record `block` as where the stream starts unless a relay already did; the origin in force."""
        await self.client.set(origin_key(kind), str(block), nx=True)
        origin = await self.origin(kind)
        return block if origin is None else origin

    async def read(
        self, kind: Kind, after: EventKey, *, block_ms: int, count: int
    ) -> tuple[list[Event], EventKey | None]:
        """Entries after `after`, waiting up to `block_ms` for the first (XREAD BLOCK), and the last id read
        (malformed entries are logged and skipped, but still move the reader on)."""
        reply: Any = await self.client.xread({stream_name(kind): str(after)}, count=count, block=block_ms)
        if not reply:
            return [], None
        groups = reply.items() if isinstance(reply, dict) else reply
        entries = [entry for _name, part in groups for entry in part]
        last = EventKey.parse(_text(entries[-1][0])) if entries else None
        return self._events(kind, entries), last

    async def range(self, kind: Kind, after: EventKey, until: EventKey, *, count: int) -> list[Event]:
        """Entries in (after, until], at most `count` (XRANGE with an exclusive start)."""
        entries = await self.client.xrange(stream_name(kind), f"({after}", str(until), count=count)
        return self._events(kind, entries or [])

    async def covers(self, kind: Kind, after: EventKey) -> bool:
        """True when every event after `after` that the relays wrote is still in the stream (not trimmed)."""
        origin = await self.origin(kind)
        if origin is None or after < start_position(kind, origin):
            return False
        try:
            info: dict[Any, Any] = await self.client.xinfo_stream(stream_name(kind))
        except ResponseError:
            return True  # no stream yet: nothing written after the origin, nothing trimmed
        info = {_text(k) if isinstance(k, bytes | str) else k: v for k, v in info.items()}
        first = info.get("first-entry")
        if first is None or EventKey.parse(_text(first[0])) <= after:
            return True  # trimming removes the oldest entries only: everything after `after` is there
        # The first entry is after `after`: the entries between were trimmed unless none ever was.
        added = info.get("entries-added")  # Redis >= 7.0
        return added is not None and int(added) == int(info["length"])

    @staticmethod
    def _events(kind: Kind, entries: list[Any]) -> list[Event]:
        out: list[Event] = []
        for entry_id, fields in entries:
            try:
                out.append(decode_entry(kind, entry_id, fields or {}))
            except (KeyError, ValueError, TypeError):
                log.error("skipping a malformed entry %r of %s: %r", entry_id, stream_name(kind), fields)
        return out
