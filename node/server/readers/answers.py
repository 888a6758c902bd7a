"""A read worker's answers remembered for the store they were read from: a call with the same method and
request bytes, served from the same store, gets the bytes answered before without reading them again.

    answers = AnswerMemo(READ_ANSWER_BYTES)         # node/constants.py; --read-answer-bytes
    raw = answers.answer(path, request, snapshot)   # None: read, serialise, then answers.keep(...)

The store is named by its LMDB snapshot id (`LmdbReadView.snapshot_id`: the last write transaction
committed before the call's read transaction began). Any write to the store, a block or anything else,
moves it, and every answer kept under an older id is then stale and never served: there is nothing to
invalidate by hand. The ids only grow: a worker reads one LMDB environment for its whole life (a
restore, a state sync or a reset of the data directory runs with the node and its workers stopped), and
LMDB never reuses a transaction id within an environment. Between two blocks the same GetAccount is
answered from memory; the read transaction is still opened on every call (that is how the id is known),
and what the memo saves is the reading, decoding, building and serialising: about a quarter of a
worker's GIL time per GetAccount.

Bounded by bytes per worker (request, answer and 256 bytes an entry) by node/memo.py's rules: an entry
over a sixty-fourth of the bound is not kept; when full, the oldest go first. An entry of an older
snapshot is replaced when its key is answered again. Only the worker's own reads of the committed store
use it (node/server/readers/local.py), never an answer relayed from the main process (GetMessage's
fallback for a dropped message).
"""

from __future__ import annotations

from node.memo import ENTRY_OVERHEAD, BoundedMemo


class AnswerMemo(BoundedMemo[tuple[str, bytes], tuple[int, bytes]]):
    """Answers kept under (method path, request bytes) with the snapshot they were read from; an entry
    costs its request, its answer and ENTRY_OVERHEAD (node/memo.py)."""

    def answer(self, path: str, request: bytes, snapshot: int) -> bytes | None:
        """The answer kept for this call when it was read from the same snapshot of the store, else None."""
        found = self.get((path, request))
        if found is None or found[0] != snapshot:
            self.misses += 1
            return None
        self.hits += 1
        return found[1]

    def keep(self, path: str, request: bytes, snapshot: int, answer: bytes) -> None:
        self.put((path, request), (snapshot, answer), len(request) + len(answer) + ENTRY_OVERHEAD)
