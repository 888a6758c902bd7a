"""`chain-node backup etcd`: an etcd snapshot file (`etcdctl snapshot save`) into the chain's bucket.

    s3://BUCKET/PREFIX/etcd/NETWORK/etcd-<UTC time>.db

The same bucket, prefix, endpoint and credentials as the chain's backups, beside them under `etcd/` (no
network is named `etcd`: network names are the chain's). The file goes up as one multipart upload: it
appears whole or not at all (an upload stopped halfway is aborted here, or by the next run once it is older
than the grace period); then the oldest beyond `keep` are deleted. The times sort as the keys do.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from node.errors import BackupFailed, BackupReason
from node.server.backup.layout import PART_BYTES, Location
from node.server.backup.objstore import Bucket, Multipart

ETCD_DIR = "etcd"


def etcd_prefix(root: Location, network: str) -> str:
    """`PREFIX/etcd/NETWORK/`."""
    return root.network_prefix(network).removesuffix(f"{network}/") + f"{ETCD_DIR}/{network}/"


@dataclass
class EtcdUploaded:
    key: str
    bytes: int
    seconds: float
    kept: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)


def upload_etcd(
    bucket: Bucket,
    root: Location,
    network: str,
    file: Path,
    *,
    keep: int,
    grace_seconds: float = 86400.0,
    part_bytes: int = PART_BYTES,
) -> EtcdUploaded:
    """Upload `file` (a non-empty etcd snapshot), then keep the `keep` newest under the etcd prefix."""
    if keep < 1:
        raise BackupFailed(BackupReason.INVALID_ARGUMENT, "--keep must be at least 1")
    try:
        size = file.stat().st_size
    except OSError as exc:
        raise BackupFailed(BackupReason.INVALID_ARGUMENT, f"{file}: {exc.strerror}") from None
    if size == 0:
        raise BackupFailed(BackupReason.INVALID_ARGUMENT, f"{file} is empty: no etcd snapshot to upload")
    bucket.check()
    prefix = etcd_prefix(root, network)
    key = f"{prefix}etcd-{datetime.now(tz=UTC).strftime('%Y%m%dT%H%M%SZ')}.db"
    started = time.monotonic()
    upload = Multipart(bucket, key)
    try:
        with file.open("rb") as f:
            while data := f.read(part_bytes):
                upload.add(data)
        upload.complete()
    except BaseException:
        upload.abort()
        raise
    done = EtcdUploaded(key, size, round(time.monotonic() - started, 3))
    _rotate(bucket, prefix, keep, grace_seconds, done)
    return done


def _rotate(bucket: Bucket, prefix: str, keep: int, grace_seconds: float, done: EtcdUploaded) -> None:
    names = sorted((k for k, _, _ in bucket.objects(prefix) if k.endswith(".db")), reverse=True)
    done.kept, doomed = names[:keep], names[keep:]
    if doomed:
        bucket.delete(doomed)
    done.deleted = doomed
    stale = datetime.now(tz=UTC) - timedelta(seconds=grace_seconds)
    for key, upload_id, initiated in bucket.uploads(prefix):
        if initiated < stale:
            bucket.abort(key, upload_id)
