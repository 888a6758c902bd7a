"""Messages this member admitted and then dropped: why, and at which height, kept for a bounded time.

    dropped = DroppedMessages(capacity=DROPPED_CAPACITY, max_age=DROPPED_SECONDS)
    dropped.record(message_hash, "AUTH_EXPIRED", "the key expired", height=12)
    dropped.get(message_hash)       # DroppedRecord(reason, detail, height), or None (never dropped, or too long ago)
    dropped.discard(hashes)         # admitted again: no longer dropped

GetMessage on a hash the store does not hold answers MESSAGE_DROPPED (a NOT_FOUND with the reason and the
height) from this record instead of a bare NOT_FOUND (node/server/rpc/servicer.py), and the SDK's
`wait_committed` raises `Dropped` at once. What records a drop (docs/errors.md, "Admitted, then dropped"):

- the member that orders blocks: a message its block dropped (`BlockOutput.dropped`: a time-dependent
  rejection at the block's timestamp), and one that no longer applies when the pending state is validated
  again (a block ordered elsewhere, a pending block discarded after a lost append, taking the lead):
  node/server/write/pipeline.py; the height is the block's;
- a member that forwards (forwarding.py): a held message the leader refuses when it is re-forwarded (after
  a failover the new leader never had it, and it no longer applies); the height is this member's applied
  height when the refusal came.

Bounded by count (the oldest record goes first) and by age (a record older than `max_age` seconds is not
answered and is forgotten at the next record or lookup). Records live in this process: a restart forgets
them, and GetMessage then answers a bare NOT_FOUND.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass

DROPPED_CAPACITY = 100_000  # records kept (about 200 bytes each)
DROPPED_SECONDS = 3600.0  # how long a record is answered


@dataclass(frozen=True)
class DroppedRecord:
    reason: str  # the reason code it was dropped for (node.errors.Reason)
    detail: str
    height: int  # the block that dropped it, or the height this member had applied when it learned of it


class DroppedMessages:
    """Message hash -> why it was dropped, bounded by `capacity` records and `max_age` seconds."""

    def __init__(
        self,
        capacity: int = DROPPED_CAPACITY,
        max_age: float = DROPPED_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if capacity < 1 or max_age <= 0:
            raise ValueError("a dropped-message store keeps at least one record for a positive time")
        self.capacity = capacity
        self.max_age = max_age
        self.clock = clock
        self._records: OrderedDict[bytes, tuple[float, DroppedRecord]] = OrderedDict()  # oldest first

    def __len__(self) -> int:
        return len(self._records)

    def record(self, message_hash: bytes, reason: str, detail: str, height: int) -> None:
        """Remember that `message_hash` was dropped (a later drop of the same hash replaces the record)."""
        now = self.clock()
        self._records.pop(message_hash, None)
        self._records[message_hash] = (now, DroppedRecord(reason, detail, height))
        self._expire(now)
        while len(self._records) > self.capacity:
            self._records.popitem(last=False)

    def get(self, message_hash: bytes) -> DroppedRecord | None:
        """Why `message_hash` was dropped, or None when it was not (or longer ago than `max_age`)."""
        self._expire(self.clock())
        found = self._records.get(message_hash)
        return None if found is None else found[1]

    def discard(self, hashes: Iterable[bytes]) -> None:
        """These messages were admitted again: they are pending, not dropped."""
        if self._records:
            for h in hashes:
                self._records.pop(h, None)

    def _expire(self, now: float) -> None:
        records = self._records
        while records:
            at, _ = next(iter(records.values()))
            if now - at <= self.max_age:
                return
            records.popitem(last=False)
