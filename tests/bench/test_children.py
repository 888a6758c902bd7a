"""bench/children.py: a bench's helper processes end when their pipes close; one that does not is killed."""

from __future__ import annotations

import multiprocessing
import time
from multiprocessing.connection import Connection

from bench.children import end_children


def _until_eof(conn: Connection) -> None:
    try:
        conn.recv()
    except EOFError:
        return


def _deaf(_conn: Connection) -> None:
    time.sleep(600)


def test_children_end_on_eof_and_a_deaf_one_is_killed() -> None:
    ctx = multiprocessing.get_context("spawn")
    pipes, procs = [], []
    for target in (_until_eof, _deaf):
        mine, theirs = ctx.Pipe()
        proc = ctx.Process(target=target, args=(theirs,), daemon=True)
        proc.start()
        theirs.close()
        pipes.append(mine)
        procs.append(proc)
    end_children(pipes, procs, timeout=2.0)
    assert [p.is_alive() for p in procs] == [False, False]
    assert procs[0].exitcode == 0  # ended by itself on EOF
    assert procs[1].exitcode == -9  # killed
    assert all(p.closed for p in pipes)
