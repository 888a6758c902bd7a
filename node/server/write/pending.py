"""The pending state as open blocks: each admitted message is executed once, into the block that commits it.

The mempool's effects sit on a read snapshot of the committed state as a stack of open blocks
(`OpenBlock`), oldest first. Each has a fixed context chosen when it opens: its number (the committed
height plus its depth), its time (`timestamp_ms`, never before the block below it; the transition's
`now` is its whole second) and its first event id (the committed message count, plus the messages
below it, plus one). Admission appends a message to the top block with exactly what the state
transition does for a block (`append_message`: the block limits, `apply_message`, the message records),
so when the orderer cuts the oldest block, sealing it (`seal_block`: stats, state root, header) yields
the very block a follower produces by applying it with `apply_block`, and nothing is executed again.

The top block closes, and a new one opens at the current time, when the message would exceed a block
limit (MAX_BLOCK_MESSAGES, the per-project share, the producer's MAX_BLOCK_BYTES), or when its timestamp
is too far ahead of the top block's time but not of the wall clock. Admission also checks the message's
time against the wall clock (a message stale now is refused even when the top
block is older).

`flat` is the other mode, for pending messages while blocks come from elsewhere with their own times
(a leader that lost the lead, until it forwards its first submission: a member that forwards keeps no
pending state, pipeline.py `hold`): each validated at the wall clock onto one overlay, and after a block
that committed the oldest pending messages the overlay is kept as it is. Such a pending state is never
sealed: the orderer rebuilds it into open blocks first (node/server/write/pipeline.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from chain.v1 import block_pb2
from chain.v1 import message_pb2 as pb
from node import merkle
from node.constants import MAX_BLOCK_BYTES, MAX_FUTURE_DRIFT
from node.errors import InvariantBroken, MessageRejected, Reason
from node.params import ChainParams
from node.state.access import StateAccess
from node.state.kinds import project_of
from node.state.registry import REGISTRY
from node.state.structural import validate_structure
from node.state.transition import (
    BlockBody,
    BlockOutput,
    BlockStart,
    append_message,
    apply_message,
    check_not_committed,
    check_room,
    check_time,
    seal_block,
)
from node.storage.kv import MemoView, Overlay, ReadView

# An open block older than this when it is cut is executed again at the cut's time instead (its
# timestamp would lag the wall clock by more than a block is ever expected to wait; docs/state.md).
MAX_OPEN_BLOCK_AGE_MS = 60_000


@dataclass
class OpenBlock:
    """A block being filled: its fixed context, the overlay holding its effects, what it applied."""

    overlay: Overlay
    number: int
    timestamp_ms: int
    first_event_id: int
    body: BlockBody = field(default_factory=BlockBody)
    size: int = 0  # the serialized bytes of its messages (MAX_BLOCK_BYTES)
    closed: bool = False  # no more admissions (full, outgrown, or being sealed)
    output: BlockOutput | None = None  # once sealed

    @property
    def now(self) -> int:
        return self.timestamp_ms // 1000

    @property
    def next_event_id(self) -> int:
        return self.first_event_id + len(self.body.applied)


class PendingBlocks:
    """Open blocks over one committed snapshot (`base`, whose head is block `height`)."""

    def __init__(self, params: ChainParams, base: ReadView, *, flat: bool = False) -> None:
        self.params = params
        self.base: ReadView = MemoView(base)  # the messages of a block read the same records again and again
        st = StateAccess(Overlay(self.base))
        head = st.head()
        if head is None:
            raise InvariantBroken("the store has no genesis block")
        self.head = head
        self._total_messages = st.stats().total_messages
        self.flat = flat
        self.max_bytes = MAX_BLOCK_BYTES
        self.blocks: list[OpenBlock] = []
        self._flat_overlay = Overlay(self.base)

    @property
    def height(self) -> int:
        return int(self.head.header.number)

    @property
    def top_overlay(self) -> Overlay:
        if self.flat:
            return self._flat_overlay
        return self.blocks[-1].overlay if self.blocks else self._flat_overlay

    # ---- admission ----
    def admit(self, msg: pb.Message, wall_ms: int) -> None:
        """Apply `msg` onto the pending state (MessageRejected, and nothing changed, when it does not apply)."""
        if self.flat:
            apply_message(
                self._flat_overlay, self.params, msg, block_number=self.height + 1, now=wall_ms // 1000, event_id=0
            )
            return
        block = self._top(wall_ms)
        if block.now != wall_ms // 1000:  # the block is older than this second: the wall-clock time rule too
            kind = REGISTRY.kind_of(int(msg.data.type))
            validate_structure(msg.data, kind, self.params.network)  # its refusals come first, as in apply_message
            check_time(kind.max_age, msg.data.timestamp, wall_ms // 1000)
            if msg.data.timestamp > block.now + MAX_FUTURE_DRIFT:  # fine now, ahead of the block's time
                block = self._open(wall_ms)
        size = msg.ByteSize()
        if not self._has_room(block, msg, size):
            block = self._open(wall_ms)
        self._append(block, msg)
        block.size += size

    def precheck(self, msg: pb.Message, wall_ms: int) -> None:
        """What a member that forwards `msg` checks here (pipeline.py `hold`): everything `apply_message`
        checks that needs no pending state, in its order (the kind, the structure, the time at the wall
        clock) and that the committed state does not hold it already. Nothing is applied."""
        kind = REGISTRY.kind_of(int(msg.data.type))
        validate_structure(msg.data, kind, self.params.network)
        check_time(kind.max_age, msg.data.timestamp, wall_ms // 1000)
        check_not_committed(StateAccess(Overlay(self.base)), msg.hash)

    def dry_run(self, msg: pb.Message, wall_ms: int) -> None:
        """Would `msg` apply now? At the wall clock, on a throwaway child of the top block; no change."""
        apply_message(
            self.top_overlay.child(), self.params, msg, block_number=self._top_number(), now=wall_ms // 1000, event_id=0
        )

    def _top_number(self) -> int:
        if self.flat or not self.blocks:
            return self.height + 1
        return self.blocks[-1].number

    def _top(self, wall_ms: int) -> OpenBlock:
        if not self.blocks or self.blocks[-1].closed:
            return self._open(wall_ms)
        return self.blocks[-1]

    def _open(self, wall_ms: int) -> OpenBlock:
        """Close the top block (if any) and open the next at `wall_ms` (never before the block below)."""
        if self.blocks:
            below = self.blocks[-1]
            below.closed = True
            block = OpenBlock(
                overlay=below.overlay.child(),
                number=below.number + 1,
                timestamp_ms=max(wall_ms, below.timestamp_ms),
                first_event_id=below.next_event_id,
            )
        else:
            block = OpenBlock(
                overlay=Overlay(self.base),
                number=self.height + 1,
                timestamp_ms=max(wall_ms, int(self.head.header.timestamp_ms)),
                first_event_id=self._total_messages + 1,
            )
        self.blocks.append(block)
        return block

    def _has_room(self, block: OpenBlock, msg: pb.Message, size: int) -> bool:
        body = block.body
        if body.applied and block.size + size > self.max_bytes:
            return False  # the producer's byte cap: a message alone over it still gets a block of its own
        try:
            check_room(msg, project_of(msg.data, msg.hash), body.seen, len(body.applied), body.per_project)
        except MessageRejected as exc:
            if exc.reason is Reason.LIMIT_EXCEEDED and body.applied:
                return False
            raise
        return True

    def _append(self, block: OpenBlock, msg: pb.Message) -> None:
        append_message(
            block.overlay,
            self.params,
            block.body,
            msg,
            number=block.number,
            first_event_id=block.first_event_id,
            now=block.now,
            verifier=None,  # the node verified every message before admission
        )

    # ---- cutting ----
    def sealer(self, nodes: merkle.TreeUpdater, now_ms: int) -> Callable[[], BlockOutput] | None:
        """Close the oldest open block; the returned function seals it (it may run in a worker thread while
        admission goes on into the blocks above; with nothing pending, an empty block opened at `now_ms`).
        None when there is no block to cut this way: the state is flat, or the oldest block is older than
        MAX_OPEN_BLOCK_AGE_MS at `now_ms`."""
        if self.flat:
            return None
        block = self.blocks[0] if self.blocks else self._open(now_ms)
        if now_ms - block.timestamp_ms > MAX_OPEN_BLOCK_AGE_MS:
            return None
        block.closed = True
        if block.output is not None:  # sealed before and not committed (the disk refused it): the same block
            done = block.output
            return lambda: done
        # a copy, so the seal's records (stats, block, head) never change a dict admission may be reading
        start = BlockStart(
            base=self.base,
            overlay=block.overlay.copy(),
            parent=self.head,
            number=block.number,
            first_event_id=block.first_event_id,
        )

        def seal() -> BlockOutput:
            block.output = seal_block(start, nodes, self.params, block.timestamp_ms, block.body)
            return block.output

        return seal

    def is_next(self, block: block_pb2.Block) -> bool:
        """Is `block` the oldest open block, as sealed here?"""
        if self.flat or not self.blocks or self.blocks[0].output is None:
            return False
        return bytes(self.blocks[0].output.block.hash) == bytes(block.hash)

    # ---- moving on after a block ----
    def drop_committed(self, base: ReadView) -> PendingBlocks:
        """The blocks above the oldest one, which was committed, over the new committed state `base`."""
        moved = PendingBlocks(self.params, base)
        previous = moved.base
        for block in self.blocks[1:]:
            block.overlay = block.overlay.rebase(previous)
            previous = block.overlay
            moved.blocks.append(block)
        if moved.blocks and (moved.blocks[0].number != moved.height + 1):
            raise InvariantBroken(f"open block {moved.blocks[0].number} does not follow {moved.height}")
        return moved

    @property
    def can_flatten(self) -> bool:
        """False once a block was sealed here: its records (stats, head) must not outlive it."""
        return not any(b.output is not None for b in self.blocks)

    def flattened(self, base: ReadView) -> PendingBlocks:
        """The same effects as one flat overlay over `base`, after a block from elsewhere committed the oldest
        pending messages (their effects stay: `base` holds them now)."""
        moved = PendingBlocks(self.params, base, flat=True)
        if self.flat:
            moved._flat_overlay = self._flat_overlay.rebase(moved.base)
        else:
            for block in self.blocks:
                moved._flat_overlay.update(block.overlay.writes)
        return moved
