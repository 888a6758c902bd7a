"""Where a backup lives in the bucket, and what a listing of the bucket means.

    s3://BUCKET/PREFIX/NETWORK/<height:012d>-<state root hex>/started.json  when the upload began (first)
                                                              data.mdb      the snapshot's store (multipart)
                                                              backup.json   what it is
                                                              manifest.pb   chunk hashes (written LAST)

A backup is complete exactly when its `manifest.pb` exists: it is written after every other object, so an
upload stopped anywhere (a kill -9, a lost pod, a network failure) is never listed as complete; its
`started.json` dates the attempt, so `prune` can tell a leftover from an upload still running. The height is
zero-padded so the keys sort by height. Two backups of the same block have the same key: a second `create`
of a block already backed up does nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from node.errors import BackupFailed, BackupReason

PART_BYTES = 16 * 1024 * 1024  # `backup create`'s default multipart part size

STARTED, DATA, INFO, MANIFEST = "started.json", "data.mdb", "backup.json", "manifest.pb"
NAME_RE = re.compile(r"^(\d{12})-([0-9a-f]{64})$")
BUCKET_RE = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
NETWORK_RE = re.compile(r"^[a-z0-9-]{1,32}$")


def backup_name(height: int, state_root: bytes) -> str:
    return f"{height:012d}-{state_root.hex()}"


@dataclass(frozen=True)
class Location:
    """`s3://bucket/prefix`: the root every network's backups go under; `name` when it names one backup."""

    bucket: str
    prefix: str  # "" or "a/b" (no leading or trailing slash)
    network: str = ""
    name: str = ""

    @classmethod
    def parse(cls, url: str) -> Location:
        """`s3://bucket[/prefix]`, or `s3://bucket[/prefix]/NETWORK/NAME` naming one backup."""
        if not url.startswith("s3://"):
            raise BackupFailed(BackupReason.INVALID_ARGUMENT, f"{url!r} is not an s3://bucket/prefix URL")
        bucket, _, rest = url.removeprefix("s3://").partition("/")
        if not BUCKET_RE.match(bucket):
            raise BackupFailed(BackupReason.INVALID_ARGUMENT, f"{bucket!r} is not a bucket name")
        parts = [p for p in rest.split("/") if p]
        if len(parts) >= 2 and NAME_RE.match(parts[-1]):
            return cls(bucket, "/".join(parts[:-2]), parts[-2], parts[-1])
        return cls(bucket, "/".join(parts))

    def url(self) -> str:
        return "s3://" + "/".join(p for p in (self.bucket, self.prefix, self.network, self.name) if p)

    def network_prefix(self, network: str) -> str:
        if not NETWORK_RE.match(network):
            raise BackupFailed(BackupReason.INVALID_ARGUMENT, f"{network!r} is not a network name")
        return f"{self.prefix}/{network}/" if self.prefix else f"{network}/"

    def key(self, network: str, name: str, obj: str = "") -> str:
        return f"{self.network_prefix(network)}{name}/{obj}"


@dataclass(frozen=True)
class Listed:
    """One backup directory as the bucket shows it."""

    name: str
    height: int
    state_root: str
    complete: bool
    size: int  # bytes of data.mdb (0 when absent)
    last_modified: datetime  # the newest object under it

    def to_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "height": self.height,
            "state_root": self.state_root,
            "complete": self.complete,
            "size": self.size,
            "last_modified": self.last_modified.isoformat(),
        }


@dataclass
class _Dir:
    objects: set[str]
    size: int
    newest: datetime


def dir_of(key: str, network_prefix: str) -> str:
    """The backup name a key under `network_prefix` belongs to ("" when none)."""
    name = key.removeprefix(network_prefix).partition("/")[0]
    return name if NAME_RE.match(name) else ""


def group(objects: list[tuple[str, int, datetime]], network_prefix: str) -> list[Listed]:
    """(key, size, last modified) of every object under a network's prefix, as backups, oldest first.
    Keys that are not `<name>/<object>` of a backup are not this tool's and are left out."""
    dirs: dict[str, _Dir] = {}
    for key, size, modified in objects:
        name, _, obj = key.removeprefix(network_prefix).partition("/")
        if not NAME_RE.match(name) or "/" in obj or not obj:
            continue
        d = dirs.setdefault(name, _Dir(set(), 0, modified))
        d.objects.add(obj)
        d.newest = max(d.newest, modified)
        if obj == DATA:
            d.size = size
    listed = []
    for name, d in dirs.items():
        match = NAME_RE.match(name)
        assert match is not None
        listed.append(Listed(name, int(match[1]), match[2], {DATA, INFO, MANIFEST} <= d.objects, d.size, d.newest))
    return sorted(listed, key=lambda b: (b.height, b.name))
