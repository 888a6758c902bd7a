"""The store of messages admitted and then dropped: bounded by count and by age, replaced and discarded."""

from __future__ import annotations

import json

import grpc
import pytest

from node.errors import REASON_CODE, REASON_VALUES, MessageDropped, trailer
from node.server.rpc.status import to_status
from node.server.write.dropped import DroppedMessages, DroppedRecord


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def h(n: int) -> bytes:
    return n.to_bytes(32, "big")


def test_a_record_says_why_and_at_which_height() -> None:
    store = DroppedMessages(capacity=10, max_age=60)
    store.record(h(1), "AUTH_EXPIRED", "the key expired", 12)
    assert store.get(h(1)) == DroppedRecord("AUTH_EXPIRED", "the key expired", 12)
    assert store.get(h(2)) is None
    store.record(h(1), "STALE_TIMESTAMP", "too old", 14)  # dropped again: the newer record
    assert store.get(h(1)) == DroppedRecord("STALE_TIMESTAMP", "too old", 14)
    assert len(store) == 1


def test_bounded_by_count_the_oldest_goes_first() -> None:
    store = DroppedMessages(capacity=3, max_age=60)
    for n in range(5):
        store.record(h(n), "STALE_UPDATE", "", n)
    assert len(store) == 3
    assert [store.get(h(n)) is not None for n in range(5)] == [False, False, True, True, True]
    store.record(h(2), "STALE_UPDATE", "", 9)  # recorded again: now the newest, so h(3) goes next
    store.record(h(5), "STALE_UPDATE", "", 5)
    assert store.get(h(3)) is None and store.get(h(2)) is not None and len(store) == 3


def test_bounded_by_age() -> None:
    clock = Clock()
    store = DroppedMessages(capacity=10, max_age=30, clock=clock)
    store.record(h(1), "AUTH_EXPIRED", "", 1)
    clock.now += 20
    store.record(h(2), "AUTH_EXPIRED", "", 2)
    clock.now += 10  # h(1) is exactly max_age old: still answered
    assert store.get(h(1)) is not None
    clock.now += 0.5
    assert store.get(h(1)) is None and store.get(h(2)) is not None
    assert len(store) == 1  # forgotten, not only hidden
    clock.now += 30
    assert store.get(h(2)) is None and len(store) == 0


def test_admitted_again_is_no_longer_dropped() -> None:
    store = DroppedMessages(capacity=10, max_age=60)
    store.record(h(1), "NONCE_MISMATCH", "", 3)
    store.record(h(2), "NONCE_MISMATCH", "", 3)
    store.discard([h(1), h(7)])
    assert store.get(h(1)) is None and store.get(h(2)) is not None


def test_bounds_must_keep_something() -> None:
    with pytest.raises(ValueError):
        DroppedMessages(capacity=0)
    with pytest.raises(ValueError):
        DroppedMessages(max_age=0)


def test_getmessage_answers_a_typed_not_found_with_the_reason_and_the_height() -> None:
    status, text, trailers = to_status(MessageDropped("ab" * 32, "AUTH_EXPIRED", "the key expired", 12))
    assert status == grpc.StatusCode.NOT_FOUND
    assert trailer(trailers, REASON_CODE) == "MESSAGE_DROPPED"
    values = json.loads(trailer(trailers, REASON_VALUES) or "{}")
    assert values == {"hash": "ab" * 32, "reason": "AUTH_EXPIRED", "detail": "the key expired", "height": 12}
    assert "dropped at block 12: AUTH_EXPIRED the key expired" in text  # the words older clients read
