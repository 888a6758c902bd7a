"""The mempool: verified, validated messages waiting for a block.

Deduplicated by hash, bounded, in arrival order, with per-type counts. The
orderer takes the oldest messages within the per-block and per-project limits.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from chain.v1 import message_pb2 as pb
from node.constants import MAX_BLOCK_BYTES, MAX_BLOCK_MESSAGES, MAX_BLOCK_MESSAGES_PER_PROJECT
from node.errors import MessageRejected, Reason
from node.server.telemetry.spans import Admission
from node.state.kinds import project_of


class Mempool:
    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._items: dict[bytes, pb.Message] = {}
        self._counts: Counter[int] = Counter()
        self._admissions: dict[bytes, Admission] = {}  # when and in which submit span (telemetry on)

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, message_hash: bytes) -> bool:
        return message_hash in self._items

    def check_room(self, extra: int = 0) -> None:
        """MEMPOOL_FULL unless one more message fits beside `extra` about to be added."""
        if len(self._items) + extra >= self.capacity:
            raise MessageRejected(
                Reason.MEMPOOL_FULL, f"mempool holds {self.capacity} messages", capacity=self.capacity
            )

    def add(self, msg: pb.Message, admission: Admission | None = None) -> None:
        if msg.hash in self._items:
            raise MessageRejected(Reason.DUPLICATE_MESSAGE, "message is already pending")
        self.check_room()
        self._items[bytes(msg.hash)] = msg
        self._counts[int(msg.data.type)] += 1
        if admission is not None:
            self._admissions[bytes(msg.hash)] = admission

    def add_validated(self, msgs: Mapping[bytes, pb.Message], admission: Admission | None = None) -> None:
        """Add messages by hash that the caller checked against this mempool just now (none pending, room
        for all), in order: what `add` does for each, with its checks once for the whole batch."""
        if len(self._items) + len(msgs) > self.capacity:
            self.check_room(len(msgs) - 1)  # raises MEMPOOL_FULL
        if not self._items.keys().isdisjoint(msgs):
            raise MessageRejected(Reason.DUPLICATE_MESSAGE, "message is already pending")
        self._items.update(msgs)
        counts = self._counts
        for msg in msgs.values():
            counts[msg.data.type] += 1
        if admission is not None:
            self._admissions.update(dict.fromkeys(msgs, admission))

    def admissions(self, hashes: Sequence[bytes]) -> list[Admission | None]:
        """The admission records of these pending messages (None where there is none)."""
        return [self._admissions.get(h) for h in hashes]

    def messages(self) -> list[pb.Message]:
        return list(self._items.values())

    def take(
        self,
        limit: int = MAX_BLOCK_MESSAGES,
        per_project: int = MAX_BLOCK_MESSAGES_PER_PROJECT,
        max_bytes: int = MAX_BLOCK_BYTES,
    ) -> list[pb.Message]:
        """The oldest messages that fit in one block (they stay until removed); the block's messages stop
        before the one that would take them past `max_bytes` (a message alone over it is taken alone)."""
        out: list[pb.Message] = []
        per: Counter[bytes] = Counter()
        size = 0
        for msg in self._items.values():
            if len(out) == limit:
                break
            project = project_of(msg.data, msg.hash)
            if project and per[project] >= per_project:
                continue
            size += msg.ByteSize()
            if out and size > max_bytes:
                break
            if project:
                per[project] += 1
            out.append(msg)
        return out

    def remove(self, hashes: list[bytes]) -> None:
        items, admissions, counts = self._items, self._admissions, self._counts
        for h in hashes:
            msg = items.pop(h, None)
            admissions.pop(h, None)
            if msg is not None:
                kind = msg.data.type
                counts[kind] -= 1
                if not counts[kind]:
                    del counts[kind]

    def counts(self) -> dict[int, int]:
        return dict(self._counts)
