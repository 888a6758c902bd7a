"""The first integrity failure a store meets while serving: latched, logged once, turned into DataCorrupted."""

from __future__ import annotations

import logging
from pathlib import Path

from node.errors import DataCorrupted

log = logging.getLogger("chain.store")

REMEDY_DAMAGED = (
    "restore a snapshot (--restore DIR), let the member state-sync, "
    "or start over with --reinitialize (moves the old store aside)"
)


class StoreFault:
    """The first integrity failure met while serving one store: latched, logged once."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.problem: str | None = None

    def record(self, problem: str) -> DataCorrupted:
        if self.problem is None:
            self.problem = problem
            log.error("store corrupted, serving stopped: %s: %s; %s", self.path, problem, REMEDY_DAMAGED)
        return DataCorrupted(problem)
