"""`chain-node`: run a node until SIGTERM or SIGINT; `chain-node verify-store --data-dir DIR` checks a store offline.

A store the node refuses to open (damaged, foreign, missing: node.errors.StoreRefused) stops it with one
line on stderr and exit status 2 (docs/operations.md).

`chain-node state-sync [FLAGS]` (replicated mode) only joins: it brings DATA_DIR to a store the etcd log
continues, state-syncing from a member's snapshot when needed, then exits 0 (1 with one line on failure).
The chart runs it as an init container, so a restore never eats the startup probe's budget.

`chain-node backup {create,list,prune,restore}` copies snapshots to S3-compatible object storage and restores
from there (node/server/backup/cli.py, docs/operations.md "Back up to object storage").
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from node.entry import lazy
from node.server.config import parse_config

# node/entry.py: the modules that do the work load only once the command line is parsed.
VERIFY_STORE = lazy("node.server.verify_store", "main")
STATE_SYNC = lazy("node.server.serve", "state_sync_main")
SERVE = lazy("node.server.serve", "main")
BACKUP = lazy("node.server.backup.cli", "main")


def main(argv: Sequence[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["verify-store"]:
        raise SystemExit(VERIFY_STORE(args[1:]))
    if args[:1] == ["backup"]:
        raise SystemExit(BACKUP(args[1:]))
    if args[:1] == ["state-sync"]:
        raise SystemExit(STATE_SYNC(args[1:]))
    config = parse_config(args)  # --help and a bad flag end here, before grpc, aiohttp or the store load
    SERVE(config)


if __name__ == "__main__":
    main()
