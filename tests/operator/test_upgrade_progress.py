"""`status.upgrade` as a typed `UpgradeProgress`: what one operator wrote, a restarted one reads back."""

from __future__ import annotations

from chain_operator.upgrade import Phase, UpgradeProgress

# The shape the operator has always stored (camelCase keys), mid-upgrade: a restarted operator resumes from it.
STORED = {
    "version": "1.1",
    "image": "registry.test/chain-node:1.1",
    "fromImage": "registry.test/chain-node:1.0",
    "phase": "Progressing",
    "partition": 1,
    "pod": "chain-node-1",
    "targetHeight": 42,
    "podSince": "2026-01-01T00:05:00Z",
    "startedAt": "2026-01-01T00:00:00Z",
    "message": "replacing chain-node-1",
    "revision": "chain-node-7d9f",
    "snapshot": {
        "name": "main-40-1767225600",
        "block": 40,
        "pod": "chain-node-0",
        "error": "",
        "job": {
            "id": "j1",
            "pod": "chain-node-0",
            "state": "Succeeded",
            "started": "2026-01-01T00:00:00Z",
            "snapshot": "snap-40",
            "error": "",
        },
    },
}
# What an operator stored before rollouts had a revision and a snapshot: it reads with neither.
OLDER = {k: v for k, v in STORED.items() if k not in ("revision", "snapshot")}


def test_stored_progress_reads_back_and_writes_the_same_keys() -> None:
    progress = UpgradeProgress.from_status(STORED)
    assert progress.phase is Phase.PROGRESSING and progress.partition == 1 and progress.target_height == 42
    assert progress.running("registry.test/chain-node:1.1") and not progress.running("registry.test/chain-node:1.2")
    assert progress.to_status() == STORED
    assert progress.snapshot.taken and progress.snapshot.block == 40 and progress.revision == "chain-node-7d9f"
    older = UpgradeProgress.from_status(OLDER)
    assert older.running("registry.test/chain-node:1.1") and not older.snapshot.taken and older.revision == ""


def test_finished_at_is_written_only_once_there_is_one() -> None:
    done = UpgradeProgress.from_status({**STORED, "phase": "Completed", "finishedAt": "2026-01-01T00:09:00Z"})
    assert done.phase is Phase.COMPLETED and done.to_status()["finishedAt"] == "2026-01-01T00:09:00Z"
    assert "finishedAt" not in UpgradeProgress.from_status(STORED).to_status()


def test_absent_or_malformed_progress_is_no_upgrade() -> None:
    for raw in (None, {}, {"phase": "Sideways", "partition": "x", "targetHeight": None}):
        progress = UpgradeProgress.from_status(raw)
        assert (progress.phase, progress.partition, progress.target_height) == (Phase.NONE, 0, 0)
        assert not progress.running("")
