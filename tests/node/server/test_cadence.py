"""The block cadence both block-cutting orderers use (node/server/ordering/cadence.py), on a clock the test
moves: blocks start an interval apart, only while messages are pending, and an empty one is cut once the
empty-block interval has passed since the last block."""

from __future__ import annotations

import pytest

from node.server.ordering.cadence import BlockCadence


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_blocks_start_an_interval_apart_while_messages_are_pending() -> None:
    clock = Clock()
    cadence = BlockCadence(block_interval=0.2, empty_block_interval=5.0, clock=clock)
    made: list[float] = []

    async def produce() -> None:
        made.append(clock.now)
        cadence.built(sealed=True)
        clock.now += 0.05  # building takes time: it counts toward the wait
        cadence.committed()

    assert cadence.wait() == pytest.approx(0.2)
    assert await cadence.tick(3, produce) == pytest.approx(0.2) and made == []  # not due yet
    clock.now += 0.2
    wait = await cadence.tick(3, produce)
    assert made == [pytest.approx(1000.2)] and wait == pytest.approx(0.15)
    clock.now += wait
    assert await cadence.tick(0, produce) > 0 and len(made) == 1  # nothing pending: no block, next interval
    assert cadence.blocks_from_pending == 1 and cadence.blocks_executed_again == 0
    cadence.built(sealed=False)
    assert cadence.blocks_executed_again == 1


async def test_a_late_start_does_not_bunch_the_next_ones_up() -> None:
    clock = Clock()
    cadence = BlockCadence(block_interval=0.2, empty_block_interval=5.0, clock=clock)
    clock.now += 3.0  # a long stall (the loop was busy): 15 starts missed
    assert cadence.due(1)
    assert cadence.wait() == 0.0 and cadence.due(1)  # the missed starts collapse into the one due now
    assert cadence.wait() == pytest.approx(0.2) and not cadence.due(1)  # then an interval apart again
    clock.now += 0.2
    assert cadence.due(1)


async def test_an_empty_block_once_the_empty_interval_has_passed_since_the_last_block() -> None:
    clock = Clock()
    cadence = BlockCadence(block_interval=0.2, empty_block_interval=1.0, clock=clock)
    clock.now += 0.8
    assert not cadence.due(0)
    clock.now += 0.2
    assert cadence.due(0)  # 1 s since the last block
    cadence.committed()  # e.g. a block applied from the log: the interval counts from there
    clock.now += 0.6
    assert not cadence.due(0)


async def test_a_block_that_could_not_be_written_is_retried_after_the_backoff() -> None:
    clock = Clock()
    cadence = BlockCadence(block_interval=0.2, empty_block_interval=5.0, clock=clock)
    clock.now += 0.2
    assert cadence.due(1)
    cadence.retry_in(2.0)
    assert cadence.wait() == pytest.approx(2.0)
    clock.now += 1.0
    assert not cadence.due(1)
    clock.now += 1.0
    assert cadence.due(1)
