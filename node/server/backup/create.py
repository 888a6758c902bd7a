"""`chain-node backup create`: copy a running node's snapshot to the object store.

The snapshot is pulled over the node's chain.v1.SnapshotSyncService (its internal listener, `--internal-addr`,
where members state-sync), so the backup needs no access to the node's volume. A `grpcs://HOST:PORT` target is
dialled over TLS with the cluster's CA and a client certificate it signed (the internal listener takes no
other client); a failed handshake is one SOURCE_UNAVAILABLE line naming the target and the CA.

As in a state sync, nothing is trusted unchecked: the manifest's shape is checked, its block hash must be the
header hash of the block the node's own chain holds at that height (GetBlock), and every chunk must hash to
the manifest's BLAKE3 before a byte of it is uploaded. `started.json` is written first (it dates the attempt
for `prune`); the chunks are gathered into the parts of one multipart upload (memory stays at one part), then
`backup.json`, then `manifest.pb` LAST: an upload stopped anywhere leaves no complete backup
(node/server/backup/layout.py), and an abandoned multipart upload is removed by `prune`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import grpc
from blake3 import blake3

from chain.v1 import rpc_pb2, service_pb2_grpc, snapshot_sync_service_pb2_grpc
from chain.v1 import snapshot_sync_pb2 as sync_pb
from node.errors import BackupFailed, BackupReason, ConfigError, RestoreFailed
from node.server.backup.layout import DATA, INFO, MANIFEST, PART_BYTES, STARTED, Location, backup_name
from node.server.backup.objstore import Bucket, Multipart
from node.server.snapshots.manifest import check_shape
from node.server.snapshots.staging import check_chunk
from node.tls import ClientTLS, parse_target, sync_channel, tls_failure

if TYPE_CHECKING:
    from chain.v1.service_pb2_grpc import ChainServiceStub
    from chain.v1.snapshot_sync_service_pb2_grpc import SnapshotSyncServiceStub

log = logging.getLogger("chain.backup")
MIN_PART_BYTES = 5 * 1024 * 1024  # S3's least part size (all parts but the last)
MAX_PARTS = 9000  # S3 allows 10,000 parts; the part size grows with the store to stay below
OPTIONS = (("grpc.max_receive_message_length", 256 * 1024 * 1024),)
FORMAT = 1


@dataclass(frozen=True)
class Created:
    url: str
    name: str
    height: int
    state_root: str
    size: int
    chunks: int
    parts: int
    skipped: bool  # this block was backed up already: nothing uploaded


def part_size(total: int, wanted: int) -> int:
    return max(wanted, math.ceil(total / MAX_PARTS))


class Source:
    """The node backed up: its status, its snapshot's manifest and chunks, each checked."""

    def __init__(self, channel: grpc.Channel, addr: str, timeout: float, tls: ClientTLS | None = None) -> None:
        self.addr = addr
        self.tls = tls or ClientTLS()
        self.deadline = time.monotonic() + timeout
        self.chain: ChainServiceStub = service_pb2_grpc.ChainServiceStub(channel)
        self.sync: SnapshotSyncServiceStub = snapshot_sync_service_pb2_grpc.SnapshotSyncServiceStub(channel)

    def _left(self) -> float:
        return max(1.0, self.deadline - time.monotonic())

    def network(self) -> str:
        with self._rpc("GetNodeStatus"):
            return str(self.chain.GetNodeStatus(rpc_pb2.GetNodeStatusRequest(), timeout=30).status.network)

    def manifest(self, name: str) -> sync_pb.SnapshotManifest:
        with self._rpc(f"GetSnapshotManifest({name or 'newest'})"):
            reply = self.sync.GetSnapshotManifest(sync_pb.GetSnapshotManifestRequest(name=name), timeout=60)
        try:
            check_shape(reply.manifest)
        except RestoreFailed as exc:
            raise BackupFailed(BackupReason.SOURCE_MISMATCH, f"{self.addr}: {exc}") from None
        with self._rpc(f"GetBlock({reply.manifest.block_number})"):
            request = rpc_pb2.GetBlockRequest(block_number=reply.manifest.block_number)
            block = self.chain.GetBlock(request, timeout=30).block
        if bytes(block.hash) != bytes(reply.manifest.block_hash):
            raise BackupFailed(
                BackupReason.SOURCE_MISMATCH,
                f"{self.addr} serves snapshot {reply.manifest.name} whose block hash is not the one of its block "
                f"{reply.manifest.block_number}",
            )
        return reply.manifest

    def chunks(self, manifest: sync_pb.SnapshotManifest) -> Iterator[bytes]:
        """Every chunk in order, each checked against the manifest before it is handed on."""
        expect = 0
        request = sync_pb.GetSnapshotChunksRequest(name=manifest.name, first_chunk=0)
        with self._rpc(f"GetSnapshotChunks({manifest.name})"):
            for reply in self.sync.GetSnapshotChunks(request, timeout=self._left()):
                try:
                    check_chunk(manifest, reply.index, reply.data, expect)
                except RestoreFailed as exc:
                    raise BackupFailed(BackupReason.CHECKSUM_MISMATCH, f"from {self.addr}: {exc}") from None
                expect += 1
                yield reply.data
        if expect != manifest.chunk_count:
            raise BackupFailed(
                BackupReason.SOURCE_UNAVAILABLE,
                f"{self.addr}: the chunk stream of {manifest.name} ended at {expect}/{manifest.chunk_count}",
            )

    @contextlib.contextmanager
    def _rpc(self, what: str) -> Iterator[None]:
        try:
            yield
        except grpc.RpcError as exc:
            code = exc.code() if isinstance(exc, grpc.Call) else None
            detail = exc.details() if isinstance(exc, grpc.Call) else str(exc)
            if code == grpc.StatusCode.UNAVAILABLE and handshake_failed(detail or "", self.addr):
                raise BackupFailed(
                    BackupReason.SOURCE_UNAVAILABLE,
                    f"{self.addr} {what}: TLS handshake failed (trusting {self.tls.describe()}, client certificate "
                    f"{self.tls.cert_file or 'none'}): {' '.join((detail or '').split()[-12:])}",
                ) from None
            if code == grpc.StatusCode.NOT_FOUND:
                raise BackupFailed(BackupReason.SOURCE_UNAVAILABLE, f"{self.addr} {what}: {detail}") from None
            name = code.name if code is not None else "error"
            raise BackupFailed(BackupReason.SOURCE_UNAVAILABLE, f"{self.addr} {what}: {name} {detail}") from None


def handshake_failed(detail: str, addr: str) -> bool:
    """A call that failed in the TLS handshake: a certificate the client refused (unknown CA, wrong name), or a
    TLS server that closed the connection on a client without an acceptable certificate."""
    text = detail.lower()
    secure = parse_target(addr).secure
    return tls_failure(detail) or "hostname verification" in text or (secure and "socket closed" in text)


def parts(chunks: Iterator[bytes], size: int) -> Iterator[bytes]:
    """Chunks gathered into parts of at least `size` bytes (the last may be smaller)."""
    buf = bytearray()
    for data in chunks:
        buf += data
        if len(buf) >= size:
            yield bytes(buf)
            buf.clear()
    if buf:
        yield bytes(buf)


def info_document(manifest: sync_pb.SnapshotManifest, network: str, source: str) -> bytes:
    doc = {
        "format": FORMAT,
        "network": network,
        "block_number": int(manifest.block_number),
        "block_hash": bytes(manifest.block_hash).hex(),
        "state_root": bytes(manifest.state_root).hex(),
        "entry_count": int(manifest.entry_count),
        "total_size": int(manifest.total_size),
        "chunk_size": int(manifest.chunk_size),
        "chunk_count": int(manifest.chunk_count),
        "snapshot": manifest.name,
        "source": source,
        "created_at": int(time.time()),
        # restore checks manifest.pb against this: a damaged or swapped manifest is refused
        "manifest_blake3": blake3(manifest.SerializeToString()).hexdigest(),
    }
    return (json.dumps(doc, indent=2) + "\n").encode()


def create(
    node: str, bucket: Bucket, root: Location, *, snapshot: str = "", part_bytes: int = PART_BYTES,
    timeout: float = 3600.0, tls: ClientTLS | None = None,
) -> Created:  # fmt: skip
    """Back up `node`'s newest snapshot (or the one named) under `root`; says what it did. `node` is
    node.tls.parse_target's syntax: `grpcs://HOST:PORT` dials TLS with `tls`."""
    tls = tls or ClientTLS()
    try:
        channel = sync_channel(node, tls, OPTIONS)
    except (ConfigError, ValueError) as exc:  # an unreadable CA, certificate or key file; an empty target
        raise BackupFailed(BackupReason.INVALID_ARGUMENT, str(exc)) from None
    with channel:
        source = Source(channel, node, timeout, tls)
        network = source.network()
        manifest = source.manifest(snapshot)
        name = backup_name(int(manifest.block_number), bytes(manifest.state_root))
        where = Location(root.bucket, root.prefix, network, name)
        bucket.check()
        size = part_size(int(manifest.total_size), part_bytes)
        done = Created(
            where.url(), name, int(manifest.block_number), bytes(manifest.state_root).hex(),
            int(manifest.total_size), int(manifest.chunk_count), math.ceil(manifest.total_size / size), False,
        )  # fmt: skip
        if bucket.get(root.key(network, name, MANIFEST)) is not None:
            log.info("backup %s exists already: nothing to upload", where.url())
            return Created(**{**asdict(done), "skipped": True})
        log.info("backing up snapshot %s of %s to %s", manifest.name, node, where.url())
        started = {"started_at": int(time.time()), "snapshot": manifest.name, "source": node}
        bucket.put(root.key(network, name, STARTED), json.dumps(started).encode())  # dates this attempt
        _upload(bucket, root.key(network, name, DATA), source.chunks(manifest), size)
        bucket.put(root.key(network, name, INFO), info_document(manifest, network, node))
        bucket.put(root.key(network, name, MANIFEST), manifest.SerializeToString())  # last: now it is complete
        return done


def create_with_flags(
    node: str, bucket: Bucket, root: Location, *, snapshot: str, part_bytes: int, timeout: float,
    ca_file: Path | None, tls_cert: Path | None, tls_key: Path | None,
) -> Created:  # fmt: skip
    """`create` with the command's TLS flags (`--ca-file`, `--tls-cert`, `--tls-key`)."""
    try:
        tls = ClientTLS(ca_file, tls_cert, tls_key)
    except ConfigError as exc:  # --tls-cert without --tls-key, or the reverse
        raise BackupFailed(BackupReason.INVALID_ARGUMENT, str(exc)) from None
    return create(node, bucket, root, snapshot=snapshot, part_bytes=part_bytes, timeout=timeout, tls=tls)


def _upload(bucket: Bucket, key: str, chunks: Iterator[bytes], size: int) -> None:
    upload = Multipart(bucket, key)
    try:
        for part in parts(chunks, size):
            upload.add(part)
        upload.complete()
    except BaseException:
        with contextlib.suppress(BackupFailed):  # best effort: `prune` removes an upload left behind
            upload.abort()
        raise
