"""Fetching a snapshot from a peer's chain.v1.SnapshotSyncService into the staging directory.

The manifest is checked first (its shape, then by `bind`, which compares it with the block the ordered log
holds at its number); each chunk is hashed and checked before it is written; a transfer that stops halfway
is resumed by the next fetch of the same manifest. The complete store is verified and renamed into place
(node/server/snapshots/staging.py).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from chain.v1 import block_pb2, snapshot_sync_service_pb2_grpc
from chain.v1 import snapshot_sync_pb2 as pb
from node.errors import RestoreFailed
from node.server.snapshots.manifest import check_shape
from node.server.snapshots.staging import ChunkWriter, Staging
from node.server.snapshots.verify import Expected
from node.tls import ClientTLS, aio_channel

if TYPE_CHECKING:
    from chain.v1.snapshot_sync_service_pb2_grpc import SnapshotSyncServiceAsyncStub

log = logging.getLogger("chain.statesync")
Binder = Callable[[pb.SnapshotManifest], Awaitable[Expected]]
OPTIONS = (("grpc.max_receive_message_length", 256 * 1024 * 1024),)


@dataclass(frozen=True)
class Peer:
    node_id: str
    addr: str
    block_number: int
    name: str


async def fetch(
    peer: Peer, data_dir: Path, bind: Binder, *, replace: bool, tls: ClientTLS | None = None
) -> block_pb2.Block:
    """Fetch `peer`'s snapshot from its internal listener (over mutual TLS with `tls`), verify it and put it in
    place; its head block."""
    async with aio_channel(peer.addr, tls, OPTIONS, secure=tls is not None) as channel:
        stub: SnapshotSyncServiceAsyncStub = snapshot_sync_service_pb2_grpc.SnapshotSyncServiceStub(channel)
        reply = await stub.GetSnapshotManifest(pb.GetSnapshotManifestRequest(name=peer.name), timeout=60)
        manifest = reply.manifest
        check_shape(manifest)
        if manifest.block_number != peer.block_number:
            raise RestoreFailed(f"{peer.addr} announced block {peer.block_number} but serves {manifest.block_number}")
        expected = await bind(manifest)
        staging = Staging(data_dir)
        first = await asyncio.to_thread(staging.begin, manifest)
        log.info(
            "state sync: fetching %s (block %d, %d bytes in %d chunks) from %s at chunk %d",
            manifest.name, manifest.block_number, manifest.total_size, manifest.chunk_count, peer.addr, first,
        )  # fmt: skip
        if first < manifest.chunk_count:
            await _stream(stub, manifest, ChunkWriter(staging, manifest, first))
        log.info("state sync: all %d chunks received and checked; verifying the store", manifest.chunk_count)
        return await asyncio.to_thread(staging.install, manifest, expected, replace=replace)


async def _stream(stub: SnapshotSyncServiceAsyncStub, manifest: pb.SnapshotManifest, writer: ChunkWriter) -> None:
    request = pb.GetSnapshotChunksRequest(name=manifest.name, first_chunk=writer.next)
    try:
        async for reply in stub.GetSnapshotChunks(request):
            writer.add(reply.index, reply.data)
    finally:
        writer.close()
    if not writer.complete:
        raise RestoreFailed(f"the chunk stream of {manifest.name} ended at chunk {writer.next}/{manifest.chunk_count}")
