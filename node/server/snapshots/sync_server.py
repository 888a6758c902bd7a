"""chain.v1.SnapshotSyncService: this member's snapshots, served to members that state-sync from it.

Served on the members' gRPC port. Chunks are read from the snapshot's `data.mdb` through one open file, so
a snapshot deleted by retention while it is being sent still reaches the end of the stream. `rate` (bytes
per second, `--state-sync-rate`, 0 for no limit) caps what this member sends to every member syncing from it
together (one pace shared by its streams), so serving joining members, however many at once, cannot starve
this member's own work: two joining at once from one member each get about half.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any, BinaryIO

from chain.v1 import snapshot_sync_pb2 as pb
from chain.v1 import snapshot_sync_service_pb2_grpc
from node.errors import InvalidArgument
from node.server.snapshots.files import STORE_FILE
from node.server.snapshots.manager import SnapshotManager
from node.server.snapshots.manifest import chunk_size_of


class Pace:
    """One send rate shared by every stream: each chunk takes the next free slot of `rate` bytes/s."""

    def __init__(self, rate: int) -> None:
        self.rate = rate
        self._free_at = 0.0

    async def take(self, size: int) -> None:
        """Wait for this chunk's slot (none without a rate)."""
        if not self.rate:
            return
        now = time.monotonic()
        start = max(now, self._free_at)
        self._free_at = start + size / self.rate
        await asyncio.sleep(start - now)


class SnapshotSyncServicer(snapshot_sync_service_pb2_grpc.SnapshotSyncServiceServicer):
    def __init__(self, snapshots: SnapshotManager, *, rate: int = 0) -> None:
        self.snapshots = snapshots
        self.rate = rate
        self.pace = Pace(rate)

    async def GetSnapshotManifest(
        self, request: pb.GetSnapshotManifestRequest, context: Any
    ) -> pb.GetSnapshotManifestResponse:
        manifest, _ = await asyncio.to_thread(self.snapshots.manifest, request.name)
        return pb.GetSnapshotManifestResponse(manifest=manifest)

    async def GetSnapshotChunks(
        self, request: pb.GetSnapshotChunksRequest, context: Any
    ) -> AsyncIterator[pb.GetSnapshotChunksResponse]:
        manifest, directory = await asyncio.to_thread(self.snapshots.manifest, request.name)
        if request.first_chunk >= manifest.chunk_count:
            raise InvalidArgument("first_chunk", f"{request.first_chunk} is past the last chunk")
        f = await asyncio.to_thread((directory / STORE_FILE).open, "rb")
        try:
            for index in range(request.first_chunk, manifest.chunk_count):
                size = chunk_size_of(manifest, index)
                await self.pace.take(size)
                data = await asyncio.to_thread(_read, f, index * int(manifest.chunk_size), size)
                yield pb.GetSnapshotChunksResponse(index=index, data=data)
        finally:
            f.close()


def _read(f: BinaryIO, offset: int, size: int) -> bytes:
    f.seek(offset)
    return f.read(size)
