"""Consistent reads: what a read's answer reflects, and what a client may ask of it (docs/replication.md).

Every ChainService and KeychainService read answers from one read transaction of the member's store and
names the applied height of that snapshot in the `chain-height` trailer. By default (`serializable`) a
read answers at once from the member's applied state, which on a replicated member may be behind the log.
A call may ask for more in its metadata (REST: the headers of the same names):

- `chain-min-height: N`: answer only from a state at or past block N. The read waits for the block's commit
  (woken by it: node/server/events.py `Heights`) up to the call's deadline and at most `WAIT_CAP`, then
  refuses UNAVAILABLE (HEIGHT_NOT_REACHED) with `retry-after-ms`. A client that wrote at block N reads its
  own write anywhere with it.
- `chain-read-consistency: linearizable`: the member first learns the ordered log's height now
  (`Orderer.read_index`: a linearizable etcd read of the log's `next` key on a replicated member; the
  upstream's linearizable height on a --follow replica; its own height on a solo node, which orders every
  block), then reads at or past it as `chain-min-height` does. No answer can be older than a block any
  member had committed when the read began. When the height cannot be learnt in time: UNAVAILABLE
  (CONSISTENCY_UNAVAILABLE).

A value other than a decimal block number, or a consistency other than `serializable` and `linearizable`,
is INVALID_ARGUMENT (field: the metadata name).

    reads = Reads(chain, orderer, hub.heights)
    return await reads.answer(context, lambda r: r.get_account(request))   # in a servicer's method
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import grpc

from node.chain import Chain
from node.errors import (
    CHAIN_HEIGHT,
    CHAIN_MIN_HEIGHT,
    CHAIN_READ_CONSISTENCY,
    LINEARIZABLE,
    SERIALIZABLE,
    ChainError,
    InvalidArgument,
    MessageRejected,
    Metadata,
    Reason,
)
from node.query.heads import HEAD_KEY, HeadMemo
from node.query.reader import Reader

if TYPE_CHECKING:  # a read worker imports this module for `wish_of`, without the main process's parts
    from node.server.events import Heights
    from node.server.ordering.orderer import Orderer

T = TypeVar("T")
WAIT_CAP = 10.0  # seconds a read waits for a height at most, whatever its deadline
MAX_MARGIN = 0.5  # seconds before the call's deadline a read that cannot be answered is refused (a typed answer)
RETRY_AFTER_MS = 500  # the wait suggested with HEIGHT_NOT_REACHED and CONSISTENCY_UNAVAILABLE
MAX_DIGITS = 19  # a block number fits a signed 64-bit integer


@dataclass(frozen=True, slots=True)
class Wish:
    """What a call asked of its read: a state at or past `min_height`, and/or the log's height."""

    min_height: int = 0
    linearizable: bool = False


def _text(value: str | bytes) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def _min_height(value: str) -> int:
    text = value.strip()
    if not text.isascii() or not text.isdigit() or len(text) > MAX_DIGITS:
        raise InvalidArgument(CHAIN_MIN_HEIGHT, f"{CHAIN_MIN_HEIGHT} must be a block number (0 or more), got {value!r}")
    return int(text)


def _linearizable(value: str) -> bool:
    text = value.strip().lower()
    if text not in (LINEARIZABLE, SERIALIZABLE):
        raise InvalidArgument(
            CHAIN_READ_CONSISTENCY,
            f"{CHAIN_READ_CONSISTENCY} must be {SERIALIZABLE!r} or {LINEARIZABLE!r}, got {value!r}",
        )
    return text == LINEARIZABLE


def wish_of(metadata: Metadata | None) -> Wish | None:
    """The call's wish from its metadata; None for a default read (the fast path). InvalidArgument on a
    value it cannot take."""
    min_height = 0
    linearizable = False
    for key, value in metadata or ():
        if key == CHAIN_MIN_HEIGHT:
            min_height = _min_height(_text(value))
        elif key == CHAIN_READ_CONSISTENCY:
            linearizable = _linearizable(_text(value))
    if not min_height and not linearizable:
        return None
    return Wish(min_height, linearizable)


def budget(remaining: float | None, cap: float = WAIT_CAP) -> float:
    """How long a read may wait: the call's time left less a margin to answer in (a typed refusal, not the
    client's DEADLINE_EXCEEDED), at most `cap`."""
    if remaining is None:
        return cap
    return max(0.0, min(cap, remaining - min(MAX_MARGIN, remaining / 5)))


def not_reached(height: int, wanted: int) -> MessageRejected:
    return MessageRejected(
        Reason.HEIGHT_NOT_REACHED,
        f"this node has applied block {height}, not yet block {wanted}: retry, or read from another node",
        height=height,
        wanted=wanted,
        retry_after_ms=RETRY_AFTER_MS,
    )


class SnapshotHeight:
    """The applied height of a read transaction's snapshot: its head record, decoded once per snapshot (the
    transaction id names the snapshot; any commit moves it)."""

    def __init__(self, heads: HeadMemo) -> None:
        self._heads = heads
        self._last: tuple[int, int] = (-1, 0)  # (snapshot id, its height): one attribute, swapped whole

    def of(self, view: Any) -> int:
        snapshot = int(view.snapshot_id())
        last = self._last
        if last[0] == snapshot:
            return last[1]
        raw = view.get(HEAD_KEY)
        height = int(self._heads.block(raw).header.number) if raw is not None else 0
        self._last = (snapshot, height)
        return height


class Reads:
    """The servicers' reads: the call's wish met, then one read transaction, its height in the trailer."""

    def __init__(self, chain: Chain, orderer: Orderer, heights: Heights, cap: float = WAIT_CAP) -> None:
        self.chain = chain
        self.orderer = orderer
        self.heights = heights
        self.cap = cap
        self.height_of = SnapshotHeight(chain.heads)

    async def answer(self, context: Any, fn: Callable[[Reader], T]) -> T:
        wish = wish_of(context.invocation_metadata())
        target, until = 0, 0.0
        if wish is not None:
            until = asyncio.get_running_loop().time() + budget(context.time_remaining(), self.cap)
            target = await self.target(wish, until)
        chain = self.chain
        while True:  # the wish met in the transaction the answer is read in: no second one
            with chain.read() as (view, nodes):
                height = self.height_of.of(view)
                if height >= target:
                    out = fn(Reader(view, chain.read_tree(nodes), chain.heads))
                    break
            await self.wait(height, target, until)
        context.set_trailing_metadata(((CHAIN_HEIGHT, str(height)),))
        return out

    async def settle(self, wish: Wish, remaining: float | None) -> int:
        """Return once this member has applied what `wish` asks for (the height it asked for), or refuse."""
        until = asyncio.get_running_loop().time() + budget(remaining, self.cap)
        target = await self.target(wish, until)
        while (height := self.applied()) < target:
            await self.wait(height, target, until)
        return target

    async def target(self, wish: Wish, until: float) -> int:
        """The height `wish` asks for: its min height, or past the log's height learnt now (linearizable)."""
        if not wish.linearizable:
            return wish.min_height
        return max(wish.min_height, await self._read_index(until - asyncio.get_running_loop().time()))

    async def wait(self, height: int, target: int, until: float) -> None:
        """Wait for the next block up to `target` (woken by its commit), or refuse past `until`."""
        left = until - asyncio.get_running_loop().time()
        if left <= 0:
            raise not_reached(height, target)
        with contextlib.suppress(TimeoutError):  # the caller reads the height again; the next wait refuses
            await asyncio.wait_for(self.heights.reach(target), left)

    def applied(self) -> int:
        """The applied height now (a read transaction's snapshot: its head decoded once per snapshot)."""
        with self.chain.read() as (view, _nodes):
            return self.height_of.of(view)

    async def _read_index(self, left: float) -> int:
        try:
            return await asyncio.wait_for(self.orderer.read_index(), max(left, 0.0))
        except (TimeoutError, ChainError, grpc.RpcError) as exc:
            why = "no answer in time" if isinstance(exc, TimeoutError) else str(exc) or type(exc).__name__
            raise MessageRejected(
                Reason.CONSISTENCY_UNAVAILABLE,
                f"this node cannot learn the ordered log's height for a linearizable read: {why}",
                retry_after_ms=RETRY_AFTER_MS,
            ) from None
