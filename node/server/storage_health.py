"""Whether the node can write its store: a failed block commit stops admissions until one succeeds again.

    guard = StorageHealth()
    guard.check()                 # MessageRejected(STORAGE_FAILED, retry_after_ms=...) while failing
    delay = guard.failed(exc)     # after a commit raised StorageFailed: seconds until the next attempt
    with guard.counting(): ...    # the same for a StorageFailed raised inside, which goes on up
    guard.succeeded()             # after a commit went through

A commit that fails (disk full, I/O error) writes nothing: LMDB aborts the transaction, the candidates stay
in the mempool and the next attempt commits them. While it fails, every submission is refused with
UNAVAILABLE `STORAGE_FAILED` and a `retry-after-ms` hint (never "accepted" for a block that cannot be
written), readiness is NOT_SERVING, `chain_storage_failed` is 1, and one log line says why; attempts
back off from `base` doubling to `cap` seconds. The first commit that goes through clears it all.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from node.errors import MessageRejected, Reason, StorageFailed

log = logging.getLogger("chain.storage")


class StorageHealth:
    def __init__(self, base: float = 0.25, cap: float = 5.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.base = base
        self.cap = cap
        self.clock = clock
        self.failure = ""  # why the last commit failed ("" while healthy)
        self.attempts = 0  # consecutive failed commits
        self.failures_total = 0
        self._since = 0.0
        self._retry_at = 0.0

    @property
    def ok(self) -> bool:
        return not self.failure

    def failed(self, exc: StorageFailed) -> float:
        """Record a failed commit; the delay before the next attempt (exponential backoff)."""
        now = self.clock()
        if not self.failure:
            self._since = now
            log.error("STORAGE FAILED: cannot commit blocks (%s); refusing submissions until a commit succeeds", exc)
        self.failure = str(exc)
        self.attempts += 1
        self.failures_total += 1
        delay = float(min(self.cap, self.base * 2.0 ** min(self.attempts - 1, 16)))
        self._retry_at = now + delay
        return delay

    @contextmanager
    def counting(self) -> Iterator[None]:
        """A StorageFailed raised inside is recorded (`failed`) and raised on: the caller's loop retries."""
        try:
            yield
        except StorageFailed as exc:
            self.failed(exc)
            raise

    def succeeded(self) -> None:
        if self.failure:
            log.warning(
                "storage recovered: a block committed after %d failed attempts over %.1f s",
                self.attempts,
                self.clock() - self._since,
            )
        self.failure = ""
        self.attempts = 0

    @property
    def backing_off(self) -> bool:
        """Failing, and the next attempt is not due yet (a replicated member stays out of the election
        meanwhile; once it is due, the member may lead again to make that attempt: replicated.py)."""
        return bool(self.failure) and self.clock() < self._retry_at

    @property
    def retry_after_ms(self) -> int:
        """When a refused client should try again: the next attempt, at least half a second away."""
        return max(500, int((self._retry_at - self.clock()) * 1000) + 1)

    def check(self) -> None:
        """Refuse admissions while commits fail."""
        if self.failure:
            raise self.refusal()

    def refusal(self) -> MessageRejected:
        """The STORAGE_FAILED answer to a submission while commits fail."""
        return MessageRejected(
            Reason.STORAGE_FAILED,
            f"this node cannot write its store ({self.failure}); try again later or on another node",
            retry_after_ms=self.retry_after_ms,
        )
