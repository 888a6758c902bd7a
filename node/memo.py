"""Values kept under keys within a bound in bytes: the one memo behind the gateway's REST bodies
(gateway/rest/memo.py) and a read worker's answers (node/server/readers/answers.py).

    memo: BoundedMemo[tuple[str, bytes], bytes] = BoundedMemo(8 << 20)
    memo.put(key, value, cost)      # cost: the bytes its user counts for the entry (see ENTRY_OVERHEAD)
    memo.get(key)                   # the value kept, or None

The user says what an entry costs: the bytes it holds plus ENTRY_OVERHEAD. An entry over a sixty-fourth
of the bound is not kept (a few large entries would push everything else out); a key put again replaces
its entry; when full, the oldest entries go first. Oldest means first put: a hit does not move an entry,
which would cost more than the hit saves. A bound of 0 keeps nothing. Each user owns its memo (one per
process or event loop); it is not shared and takes no lock.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

# bytes an entry costs beyond the lengths of what it holds: the key and value tuples, the OrderedDict's slot
# and node (187 bytes by tracemalloc for a (Shaped, bytes) key and a (bytes, cost) value) and two bytes
# objects' headers (33 each)
ENTRY_OVERHEAD = 256


class BoundedMemo(Generic[K, V]):
    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max(0, max_bytes)
        self._largest = self.max_bytes // 64  # an entry's cost at most
        # insertion order is age, the first the oldest; an OrderedDict drops it in O(1) where a dict's
        # next(iter(...)) walks over the slots its earlier deletions left (13 µs a put at 14,000 entries)
        self._entries: OrderedDict[K, tuple[V, int]] = OrderedDict()
        self.size = 0  # the costs of the entries kept
        self.hits = 0  # lookups answered from the memo, and not: counted by the user's lookups, which
        self.misses = 0  # know what a hit is (a kept answer of an older snapshot is a miss)

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: K) -> V | None:
        found = self._entries.get(key)
        return None if found is None else found[0]

    def put(self, key: K, value: V, cost: int) -> None:
        """Keep `value` under `key` (replacing what was there), making room by dropping the oldest; an
        entry costing over a sixty-fourth of the bound is not kept."""
        if cost > self._largest:
            return
        entries = self._entries
        replaced = entries.pop(key, None)
        if replaced is not None:
            self.size -= replaced[1]
        while entries and self.size + cost > self.max_bytes:
            self.size -= entries.popitem(last=False)[1][1]
        entries[key] = (value, cost)
        self.size += cost
