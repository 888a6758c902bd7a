"""The chain on disk: an LMDB store plus the parameters it was created with.

`Chain` is what the node (and tests, benchmarks, snapshots) use: it opens or
creates the store, builds or applies blocks against its committed state and
commits each block's writes and tree nodes in one LMDB transaction.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from chain.v1 import block_pb2
from chain.v1 import message_pb2 as pb
from node.crypto.ed25519 import Ed25519Verifier
from node.errors import InvariantBroken
from node.state.access import StateAccess
from node.state.params import ChainParams
from node.state.transition import BlockOutput, apply_block, build_block, genesis_writes
from node.storage import schema
from node.storage.kv import Overlay
from node.storage.lmdb_store import LmdbNodeView, LmdbReadView, LmdbStore


class Chain:
    def __init__(self, store: LmdbStore, params: ChainParams) -> None:
        self.store = store
        self.params = params
        self.verifier = Ed25519Verifier()

    @classmethod
    def open(cls, path: Path | str, params: ChainParams | None = None, *, sync: bool = True) -> Chain:
        """Open a chain directory; a new one is initialised with `params` (default: devnet)."""
        store = LmdbStore(path, sync=sync)
        with store.read() as (view, _):
            raw = view.get(schema.meta_key(schema.META_GENESIS))
        if raw is None:
            params = params or ChainParams()
            store.commit(genesis_writes(params), {})
        else:
            stored = ChainParams.from_json(json.loads(raw))
            if params is not None and params != stored:
                store.close()
                raise InvariantBroken(f"{path} holds a chain with other genesis parameters")
            params = stored
        return cls(store, params)

    @contextmanager
    def read(self) -> Iterator[tuple[LmdbReadView, LmdbNodeView]]:
        with self.store.read() as views:
            yield views

    def head(self) -> block_pb2.Block:
        with self.read() as (view, _):
            head = StateAccess(Overlay(view)).head()
        if head is None:
            raise InvariantBroken("the store has no genesis block")
        return head

    @property
    def height(self) -> int:
        return int(self.head().header.number)

    def build(self, timestamp_ms: int, candidates: Sequence[pb.Message], *, verify: bool = False) -> BlockOutput:
        with self.read() as (view, nodes):
            return build_block(
                view, nodes, self.params, timestamp_ms, candidates, verifier=self.verifier if verify else None
            )

    def apply(self, block: block_pb2.Block, *, verify: bool = True) -> BlockOutput:
        with self.read() as (view, nodes):
            return apply_block(view, nodes, self.params, block, verifier=self.verifier if verify else None)

    def commit(self, output: BlockOutput) -> None:
        """Write one block atomically. The caller serialises commits (one writer)."""
        if output.block.header.number != self.height + 1:
            raise InvariantBroken(f"block {output.block.header.number} does not follow {self.height}")
        self.store.commit(output.writes, output.tree_nodes)

    def close(self) -> None:
        self.store.close()
