"""Which state trees the store keeps, and how the rest is collected (`--state-history`).

Every block's update replaces the nodes on its changed paths. Those nodes are still reachable from the
roots before that block, and from no root after it: the update names them (`merkle.Placed.stale`) and the
block's own write transaction indexes them in the `stale` database under the block's number
(`schema.stale_node_key(since, location, hash)`), as Jellyfish Merkle trees index stale nodes by the
version that made them stale. The index is appended in block order.

Keeping the trees of the last `history` blocks means keeping the roots of blocks `head - history + 1` to
`head`. A node stale since block `s` is reachable only from roots of blocks before `s`, so every node
stale since `horizon(head) = head - history + 1` or earlier can go: collecting is a scan from the start
of the index, deleting each named node, then the entry (`LmdbStore.prune`). It runs after each block's
commit, in a write transaction of its own (a killed collector leaves the index where its last transaction
left it: the next one continues), and at most `batch` entries at a time, so a backlog (an upgraded store,
a history made shorter) is worked off over several blocks without making any one of them slow.

`history = ALL` keeps every root (an archive node): nothing is collected, the index is still written, so a
node can later be started with a finite history and catch up. A walk from a root that is no longer whole
(older than the recorded horizon, `schema.META_PRUNED`) raises `StatePruned`, never a wrong answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Protocol

ALL: Final = 0  # `--state-history all`: every root is kept
DEFAULT_HISTORY: Final = 8
"""The default: the trees of the last 8 blocks (1.6 s of blocks at the default 200 ms interval). Every reader
of this node (RPCs, read workers, snapshots, state sync) reads one LMDB transaction, which keeps the pages it
started with, so none of them needs an old root; the margin is for tools that walk the tree at a block they
just saw. Each retained block costs its stale nodes: on a store of 240,000 messages, a block of ~900 follows
replaces about 2.4 MB of nodes, so 64 blocks kept ~150 MB, as much as the live tree (docs/merkle.md)."""
PRUNE_BATCH: Final = 200_000
"""Stale entries collected per block at most (a block of 10,000 follows on a 5M-message store makes ~120k)."""


class Collector(Protocol):
    def prune(self, horizon: int, batch: int) -> int:
        """Collect what blocks up to `horizon` made stale, at most `batch` entries (`LmdbStore.prune`)."""
        ...


@dataclass(frozen=True)
class StateHistory:
    """How many blocks' trees the store keeps (`blocks`; ALL: every one)."""

    blocks: int = DEFAULT_HISTORY

    @classmethod
    def parse(cls, text: str) -> StateHistory:
        """`all`, or a number of blocks (1 or more); ValueError otherwise."""
        if text.strip().lower() == "all":
            return cls(ALL)
        blocks = int(text)
        if blocks < 1:
            raise ValueError(f"a state history of {blocks} blocks: keep 1 or more, or 'all'")
        return cls(blocks)

    @property
    def archive(self) -> bool:
        return self.blocks == ALL

    def horizon(self, head: int) -> int | None:
        """Every node stale since this block or earlier may be collected at `head` (None: none may)."""
        if self.archive:
            return None
        horizon = head - self.blocks + 1
        return horizon if horizon > 0 else None

    def collect(self, store: Collector, head: int) -> int:
        """One collection after block `head`'s commit, by whoever committed it (the store writer process, or
        the committing thread): at most `PRUNE_BATCH` entries. How many were collected."""
        horizon = self.horizon(head)
        return 0 if horizon is None else store.prune(horizon, PRUNE_BATCH)

    def __str__(self) -> str:
        return "all" if self.archive else str(self.blocks)
