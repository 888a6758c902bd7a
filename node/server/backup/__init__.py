"""Off-cluster backups: snapshots exported to S3-compatible object storage, listed, pruned, restored.

layout.py     where a backup lives in the bucket; what makes one complete (its manifest, written last)
objstore.py   the bucket through boto3, and its failures as typed errors (BackupReason)
create.py     `backup create`: pull a node's snapshot over SnapshotSyncService, check it, upload it
prune.py      `backup list` and `backup prune`
restore.py    `backup restore`: download through the staging directory, verify, rename into place
cli.py        the `chain-node backup` command line
"""
