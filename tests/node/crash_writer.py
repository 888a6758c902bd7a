"""Child process for the crash-safety test: commits blocks until killed.

Usage: python -m tests.node.crash_writer DATA_DIR
Prints the height after every committed block (flushed), forever.
"""

from __future__ import annotations

import sys
from pathlib import Path

from chain.v1 import message_pb2 as pb
from tests.harness import Harness


def main() -> None:
    h = Harness(Path(sys.argv[1]))
    alice = h.actor(units=10)
    n = 0
    while True:
        msgs = [alice.b.account_data(pb.ACCOUNT_FIELD_BIO, f"bio {n + i}", timestamp=h.now) for i in range(300)]
        msgs += [alice.b.project_create(f"p{n // 300}-{i}") for i in range(3)] if n < 30_000 else []
        n += 300
        out = h.build(*msgs)
        print(out.block.header.number, flush=True)


if __name__ == "__main__":
    main()
