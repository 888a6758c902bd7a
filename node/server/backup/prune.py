"""`chain-node backup list` and `prune`: what a network's backups are, and keeping only the newest.

`prune --keep N` deletes the complete backups older than the N newest (by height). Of a backup it deletes,
`manifest.pb` goes first, so a prune stopped halfway leaves an incomplete backup (never listed, removed by the
next prune), not one that looks complete with objects missing. Leftovers of interrupted uploads (backup
directories without a manifest, and multipart uploads never completed or aborted) are removed once they are
older than the grace period, so an upload still running is never cut from under its writer. An attempt's age
is its newest object (`started.json` is written before the upload begins), not the multipart upload's
`Initiated` time, which S3-compatible servers do not all report faithfully; an upload outside any backup
directory falls back on `Initiated`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from node.errors import BackupFailed, BackupReason
from node.server.backup.layout import MANIFEST, Listed, Location, dir_of, group
from node.server.backup.objstore import Bucket

DEFAULT_GRACE_SECONDS = 86400.0


def listing(bucket: Bucket, root: Location, network: str) -> list[Listed]:
    """Every backup directory of `network`, complete or not, oldest first."""
    bucket.check()
    prefix = root.network_prefix(network)
    return group(bucket.objects(prefix), prefix)


@dataclass
class Pruned:
    kept: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    incomplete_deleted: list[str] = field(default_factory=list)
    uploads_aborted: list[str] = field(default_factory=list)


def prune(
    bucket: Bucket, root: Location, network: str, *, keep: int, grace_seconds: float = DEFAULT_GRACE_SECONDS,
    now: datetime | None = None,
) -> Pruned:  # fmt: skip
    if keep < 1:
        raise BackupFailed(
            BackupReason.INVALID_ARGUMENT, "--keep must be at least 1 (prune never deletes every backup)"
        )
    cutoff = (now or datetime.now(UTC)) - timedelta(seconds=grace_seconds)
    prefix = root.network_prefix(network)
    bucket.check()
    objects = bucket.objects(prefix)
    backups = group(objects, prefix)
    complete = [b for b in backups if b.complete]
    out = Pruned(kept=[b.name for b in complete[-keep:]])
    doomed = complete[:-keep]
    stale = [b for b in backups if not b.complete and b.last_modified < cutoff]
    out.deleted = [b.name for b in doomed]
    out.incomplete_deleted = [b.name for b in stale]
    names = {b.name for b in (*doomed, *stale)}
    keys = [k for k, _, _ in objects if dir_of(k, prefix) in names]
    bucket.delete([k for k in keys if k.endswith("/" + MANIFEST)])  # first: what remains is never "complete"
    bucket.delete([k for k in keys if not k.endswith("/" + MANIFEST)])
    running = {b.name for b in backups if not b.complete and b.last_modified >= cutoff}
    for key, upload_id, initiated in bucket.uploads(prefix):
        name = dir_of(key, prefix)
        if name in names or (name not in running and initiated < cutoff):
            bucket.abort(key, upload_id)
            out.uploads_aborted.append(key)
    return out
