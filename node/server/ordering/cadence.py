"""When the next block is cut, for every orderer that cuts blocks (solo, and the replicated leader).

    cadence = BlockCadence(block_interval=0.2, empty_block_interval=5.0, clock=time.time)
    wait = await cadence.tick(len(mempool), produce)  # builds one if due; seconds until the next is
    cadence.built(sealed)                             # in `produce`: counts how the block was built
    cadence.committed()                               # a block committed here or applied from the log

Blocks start one `block_interval` apart (the time spent building counts toward the wait; a late start does
not bunch the next ones up), and only while messages are pending, except that an empty block is cut once
`empty_block_interval` has passed since the last block. A block that could not be written is retried after
the store's backoff (`retry_in`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable


class BlockCadence:
    def __init__(self, block_interval: float, empty_block_interval: float, clock: Callable[[], float]) -> None:
        self.block_interval = block_interval
        self.empty_block_interval = empty_block_interval
        self.clock = clock
        self.next_at = clock() + block_interval  # when the next block may start
        self.last_block = clock()  # when the last block committed
        self.blocks_from_pending = 0  # blocks sealed from the pending state (their messages executed once)
        self.blocks_executed_again = 0  # blocks built by executing the mempool's messages again

    def wait(self) -> float:
        """Seconds until the next block may start."""
        return max(0.0, self.next_at - self.clock())

    def due(self, pending: int) -> bool:
        """Whether to build a block now, with `pending` messages waiting; a start that is due moves the next
        one an interval on, whether or not a block is built."""
        now = self.clock()
        if now < self.next_at:
            return False
        self.next_at = max(self.next_at + self.block_interval, now)
        return pending > 0 or now - self.last_block >= self.empty_block_interval

    async def tick(self, pending: int, produce: Callable[[], Awaitable[object]]) -> float:
        """Build a block with `produce` when one is due; the seconds until the next may start."""
        if self.due(pending):
            await produce()
        return self.wait()

    def built(self, sealed: bool) -> None:
        """A block was built: `sealed` from the pending state, or by executing the mempool again."""
        self.blocks_from_pending += int(sealed)
        self.blocks_executed_again += int(not sealed)

    def committed(self) -> None:
        """A block committed (the empty-block interval counts from here)."""
        self.last_block = self.clock()

    def retry_in(self, seconds: float) -> None:
        """The block could not be written: the next start is `seconds` from now (the store's backoff)."""
        self.next_at = self.clock() + seconds
