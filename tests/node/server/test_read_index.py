"""Linearizable reads share etcd reads (node/server/ordering/etcd/readindex.py), each read sent after every
caller it serves arrived."""

from __future__ import annotations

import asyncio

import pytest

from node.server.ordering.etcd.readindex import Coalesced


class Log:
    """A log whose height a test moves; each read records the height it saw and can be held in flight."""

    def __init__(self) -> None:
        self.height = 0
        self.sent: list[int] = []  # the height each read was sent at
        self.release = asyncio.Event()
        self.release.set()
        self.fail: Exception | None = None

    async def read(self) -> int:
        seen = self.height
        self.sent.append(seen)
        await self.release.wait()
        if self.fail is not None:
            raise self.fail
        return seen


async def test_callers_that_arrive_together_share_one_read() -> None:
    log = Log()
    index = Coalesced(log.read)
    log.height = 7
    assert await asyncio.gather(*(index() for _ in range(50))) == [7] * 50
    assert index.reads == 1


async def test_a_caller_arriving_during_a_read_gets_the_next_one_never_an_older_height() -> None:
    """The gate: a read already in flight was sent before this caller arrived, so it may miss a block
    committed meanwhile; the caller must wait for a read sent after it. Sharing the in-flight read fails."""
    log = Log()
    index = Coalesced(log.read)
    log.release.clear()
    first = asyncio.create_task(index())
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert log.sent == [0]  # in flight
    log.height = 5  # a block committed after that read was sent, before the second caller asks
    second = asyncio.create_task(index())
    await asyncio.sleep(0)
    log.release.set()
    assert (await first, await second) == (0, 5)
    assert index.reads == 2


async def test_a_failed_read_fails_its_callers_and_the_next_call_reads_again() -> None:
    log = Log()
    index = Coalesced(log.read)
    log.fail = ConnectionError("etcd unavailable")
    results = await asyncio.gather(index(), index(), return_exceptions=True)
    assert [type(r) for r in results] == [ConnectionError, ConnectionError]
    log.fail, log.height = None, 3
    assert await index() == 3


async def test_a_caller_that_gives_up_does_not_cancel_the_read_the_others_share() -> None:
    log = Log()
    index = Coalesced(log.read)
    log.release.clear()
    log.height = 9
    impatient = asyncio.create_task(asyncio.wait_for(index(), 0.01))
    patient = asyncio.create_task(index())
    with pytest.raises(TimeoutError):
        await impatient
    log.release.set()
    assert await patient == 9 and index.reads == 1
