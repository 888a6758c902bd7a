"""Snapshots of the store, serving them to other members, and restoring one (locally or by state sync).

manager.py    taking, listing and describing snapshots (snapshot.json, manifest.pb)
jobs.py       snapshot jobs: a copy in its own thread, polled by id, one at a time (AdminService)
manifest.py   the chunk manifest (BLAKE3 per chunk) a state sync is checked against
staging.py    restores assembled in DATA_DIR/.restore, verified, fsynced and renamed into place
verify.py     the checks a restored store passes before it is put in place (head, state tree)
restore.py    `--restore DIR` from a local snapshot
sync_server.py / sync_client.py   chain.v1.SnapshotSyncService: serving and fetching over gRPC
"""

from node.server.snapshots.manager import INFO, SnapshotManager, read_info
from node.server.snapshots.restore import restore

__all__ = ["INFO", "SnapshotManager", "read_info", "restore"]
