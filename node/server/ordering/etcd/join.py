"""Joining a replicated network: state sync from a peer when the log alone cannot bring this member up.

Before a member opens its store it compares what it holds with the log in etcd:

- a store the log continues (its height + 1 is still in the log): nothing to do, the log is replayed;
- no store, or a store the log was compacted past (a lost or retained old volume): it fetches a snapshot a
  live member serves (`snapshot/<id>` keys, attached to the members' leases; chosen by `sources`), checks the
  snapshot's header hash and state root against the block the log holds at that number, fetches and checks
  every chunk, verifies the store and renames it into place (node/server/snapshots/);
- no store, no snapshot served anywhere and a log that still starts at block 1: a new member replays the
  whole log from genesis.

Which member it syncs from (`sources`): the snapshots within `SPREAD_BLOCKS` of the newest are fresh enough
(the log replays the difference), and among those each joiner ranks the members by a hash of its own id and
theirs, so members joining at once spread over the members that serve instead of all pulling from one; the
older ones follow, newest first, and each is tried in that order. What a member sends is capped by its
`--state-sync-rate` (node/server/snapshots/sync_server.py).

The whole step has its own budget (`--restore-timeout`), separate from catching up afterwards; chunks
already fetched stay in `DATA_DIR/.restore` for the next try.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from collections.abc import Sequence
from pathlib import Path

import grpc
import lmdb

from chain.v1 import snapshot_sync_pb2 as pb
from node.block import header_hash
from node.errors import ChainError, RestoreFailed
from node.server.ordering.etcd.client import EtcdClient, prefix_end
from node.server.ordering.etcd.log import BlockLog, Keys
from node.server.snapshots.files import STORE_FILE
from node.server.snapshots.staging import RestoreTimeout, Staging
from node.server.snapshots.sync_client import Peer, fetch
from node.server.snapshots.verify import Expected, store_height
from node.storage.integrity import check_files
from node.tls import ClientTLS

log = logging.getLogger("chain.statesync")
MAX_ROUNDS = 3
SPREAD_BLOCKS = 20_000  # snapshots this close to the newest count as equally fresh: joiners spread over them


def snapshot_doc(block_number: int, name: str, addr: str) -> bytes:
    """The value of `snapshot/<id>`: the newest snapshot a member serves, and where."""
    return json.dumps({"block_number": block_number, "name": name, "addr": addr}, sort_keys=True).encode()


async def served_snapshots(client: EtcdClient, keys: Keys) -> list[Peer]:
    """Snapshots live members serve, newest first (values in an older format are not servable)."""
    peers = []
    for kv in await client.range(keys.snapshot_prefix, prefix_end(keys.snapshot_prefix)):
        try:
            doc = json.loads(kv.value)
            node_id = kv.key[len(keys.snapshot_prefix) :].decode()
            peers.append(Peer(node_id, str(doc["addr"]), int(doc["block_number"]), str(doc["name"])))
        except (ValueError, KeyError, TypeError):
            continue
    return sorted(peers, key=lambda p: p.block_number, reverse=True)


def sources(peers: Sequence[Peer], node_id: str, spread: int = SPREAD_BLOCKS) -> list[Peer]:
    """The order `node_id` tries `peers` in: the fresh ones (within `spread` blocks of the newest) ranked by a
    hash of the joiner's id and the member's (each joiner its own order, the same one at every try), then
    the others newest first."""
    if not peers:
        return []
    newest = max(p.block_number for p in peers)
    fresh = [p for p in peers if p.block_number >= newest - spread]
    older = sorted((p for p in peers if p.block_number < newest - spread), key=lambda p: -p.block_number)

    def rank(p: Peer) -> bytes:
        return hashlib.blake2b(f"{node_id}/{p.node_id}".encode(), digest_size=8).digest()

    return [*sorted(fresh, key=rank), *older]


async def bind_to_log(blocks: BlockLog, manifest: pb.SnapshotManifest) -> Expected:
    """The manifest must name the block the log holds at its number; otherwise nothing of it is trusted."""
    number = int(manifest.block_number)
    kv = await blocks.client.get(blocks.keys.log(number))
    if kv is None:
        raise RestoreFailed(f"snapshot {manifest.name}: block {number} is not in the log (compacted or never there)")
    block = await blocks.decode(number, kv.value)
    if header_hash(block.header) != bytes(manifest.block_hash):
        raise RestoreFailed(f"snapshot {manifest.name}: its header hash is not the one of block {number} in the log")
    if bytes(block.header.state_root) != bytes(manifest.state_root):
        raise RestoreFailed(f"snapshot {manifest.name}: its state root is not the one of block {number} in the log")
    return Expected(number, bytes(manifest.block_hash), bytes(manifest.state_root))


async def join(
    client: EtcdClient, keys: Keys, data_dir: Path, *, node_id: str, timeout: float, tls: ClientTLS | None = None
) -> str:
    """Make `data_dir` hold a store the log continues; says what it did. `tls`: how to reach the members'
    internal listeners (their certificates' CA, this member's client certificate); None for plaintext."""
    try:
        async with asyncio.timeout(timeout):
            done = ""
            for _ in range(MAX_ROUNDS):  # the log may be compacted past a snapshot while it is being fetched
                step, final = await _join_round(client, keys, data_dir, node_id=node_id, tls=tls)
                if final:
                    return done or step
                done = step
            return done
    except TimeoutError:
        raise RestoreTimeout(
            f"state sync did not finish within --restore-timeout {timeout:g}s; what was fetched stays in"
            f" {Staging(data_dir).dir} and the next start resumes it"
        ) from None


async def _join_round(
    client: EtcdClient, keys: Keys, data_dir: Path, *, node_id: str, tls: ClientTLS | None
) -> tuple[str, bool]:
    """One look at the store and the log: what was done, and whether nothing more is needed."""
    height = _local_height(data_dir)
    blocks = BlockLog(client, keys)
    tail = await blocks.tail(0, 1)
    if height is not None and (tail.first == 0 or tail.first <= height + 1):
        Staging(data_dir).discard()
        return f"the store at block {height} continues from the log", True
    peers = [p for p in await served_snapshots(client, keys) if p.node_id != node_id]
    peers = [p for p in peers if p.block_number >= tail.first - 1]  # the log must continue the snapshot
    if not peers:
        if height is None and tail.first <= 1:
            Staging(data_dir).discard()
            return "no store and no snapshot served: replaying the log from genesis", True
        raise RestoreFailed(
            f"the log starts at block {tail.first} but this node is at {height if height is not None else 'no store'}"
            " and no live member serves a snapshot to state-sync from: take a snapshot on a healthy member"
            " (AdminService.CreateSnapshot) and start this one again"
        )
    ordered = sources(peers, node_id)
    return await _sync(ordered, blocks, data_dir, replace=(data_dir / STORE_FILE).exists(), tls=tls), False


async def _sync(peers: list[Peer], blocks: BlockLog, data_dir: Path, *, replace: bool, tls: ClientTLS | None) -> str:
    errors = []
    for peer in peers:
        try:
            head = await fetch(peer, data_dir, lambda m: bind_to_log(blocks, m), replace=replace, tls=tls)
        except (grpc.RpcError, ChainError) as exc:
            detail = exc.details() if isinstance(exc, grpc.aio.AioRpcError) else str(exc)
            log.warning("state sync from %s (%s) failed: %s", peer.node_id, peer.addr, detail)
            errors.append(f"{peer.node_id}: {detail}")
            continue
        return f"state-synced block {head.header.number} from {peer.node_id} ({peer.addr})"
    raise RestoreFailed("state sync failed from every member serving a snapshot: " + "; ".join(errors))


def _local_height(data_dir: Path) -> int | None:
    if not (data_dir / STORE_FILE).exists():
        return None
    check_files(data_dir)  # the file checked before it is mapped: a damaged store is refused in one line
    try:
        return store_height(data_dir)
    except lmdb.Error as exc:
        raise RestoreFailed(f"{data_dir} holds a store that cannot be read: {exc}") from exc
