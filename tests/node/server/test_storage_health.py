"""StorageHealth on a clock the test moves: the refusal, the backoff, and when a replicated member may lead."""

from __future__ import annotations

import pytest

from node.errors import MessageRejected, StorageFailed
from node.server.storage_health import StorageHealth


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_failures_back_off_doubling_to_the_cap_and_a_success_clears_them() -> None:
    clock = Clock()
    guard = StorageHealth(base=0.25, cap=1.0, clock=clock)
    guard.check()  # healthy: admitted
    assert [guard.failed(StorageFailed("disk full")) for _ in range(4)] == [0.25, 0.5, 1.0, 1.0]
    assert not guard.ok and guard.failures_total == 4
    with pytest.raises(MessageRejected) as info:
        guard.check()
    assert info.value.reason.value == "STORAGE_FAILED" and "disk full" in str(info.value)
    assert info.value.values["retry_after_ms"] == 1001  # the next attempt, 1 s away
    guard.succeeded()
    assert guard.ok and guard.attempts == 0 and guard.failures_total == 4
    guard.check()


def test_backing_off_only_until_the_next_attempt_is_due() -> None:
    """What a replicated member reads before it campaigns: failing and not yet due keeps it out; once due it
    may lead to make the attempt (a one-member cluster has nobody else to)."""
    clock = Clock()
    guard = StorageHealth(base=0.25, cap=5.0, clock=clock)
    assert not guard.backing_off
    guard.failed(StorageFailed("Input/output error"))
    assert guard.backing_off
    clock.now += 0.3
    assert not guard.backing_off and not guard.ok  # due: still failing, but free to try
    guard.failed(StorageFailed("Input/output error"))
    clock.now += 0.4
    assert guard.backing_off  # the second delay is 0.5 s
    guard.succeeded()
    assert not guard.backing_off


def test_counting_records_a_failure_raised_inside_and_raises_it_on() -> None:
    guard = StorageHealth(clock=Clock())
    with pytest.raises(StorageFailed), guard.counting():
        raise StorageFailed("MapFullError")
    assert guard.failure == "MapFullError" and guard.attempts == 1
