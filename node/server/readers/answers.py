"""A read worker's answers remembered for the store they were read from: a call with the same method and
request bytes, served from the same store, gets the bytes answered before without reading them again.

    answers = AnswerMemo(ANSWER_BYTES)
    raw = answers.get(path, request, snapshot)      # None: read, serialise, then answers.put(...)

The store is named by its LMDB snapshot id (`LmdbReadView.snapshot_id`: the last write transaction
committed before the call's read transaction began). Any write to the store, a block or anything else,
moves it, and every answer kept under an older id is then stale and never served: there is nothing to
invalidate by hand. The ids only grow: a worker reads one LMDB environment for its whole life (a
restore, a state sync or a reset of the data directory runs with the node and its workers stopped), and
LMDB never reuses a transaction id within an environment. Between two blocks the same GetAccount is
answered from memory; the read transaction is still opened on every call (that is how the id is known),
and what the memo saves is the reading, decoding, building and serialising: about a quarter of a
worker's GIL time per GetAccount (docs/performance.md, twenty-sixth pass).

Bounded by bytes per worker (request, answer and 200 bytes an entry); an entry over a sixty-fourth of the
bound is not kept; when full, the oldest go first. An entry of an older snapshot is replaced when its key
is answered again. Only the worker's own reads of the committed store use it (node/server/readers/local.py),
never an answer relayed from the main process (GetMessage's fallback for a dropped message).
"""

from __future__ import annotations

from node.constants import READ_ANSWER_BYTES

ENTRY_OVERHEAD = 200  # bytes beyond the request and the answer: the key and value tuples, the dict slot
ANSWER_BYTES = READ_ANSWER_BYTES  # per read worker (64 MiB are budgeted for each, node/server/write/sizing.py)


class AnswerMemo:
    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max(0, max_bytes)
        self._largest = self.max_bytes // 64
        self._entries: dict[tuple[str, bytes], tuple[int, bytes]] = {}
        self.size = 0

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, path: str, request: bytes, snapshot: int) -> bytes | None:
        """The answer kept for this call when it was read from the same snapshot of the store, else None."""
        found = self._entries.get((path, request))
        if found is None or found[0] != snapshot:
            return None
        return found[1]

    def put(self, path: str, request: bytes, snapshot: int, answer: bytes) -> None:
        cost = len(request) + len(answer) + ENTRY_OVERHEAD
        if cost > self._largest:
            return
        entries = self._entries
        key = (path, request)
        old = entries.pop(key, None)
        if old is not None:
            self.size -= len(request) + len(old[1]) + ENTRY_OVERHEAD
        while entries and self.size + cost > self.max_bytes:
            (old_path, old_request), (_, old_answer) = next(iter(entries.items()))
            del entries[(old_path, old_request)]
            self.size -= len(old_request) + len(old_answer) + ENTRY_OVERHEAD
        entries[key] = (snapshot, answer)
        self.size += cost
