"""The helper processes a bench spawns (servers, load clients), each with a pipe: ended together.

end_children(pipes, procs)    # pipes closed (each child stops on EOF), then joined; killed after 10 s
"""

from __future__ import annotations

from collections.abc import Iterable
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess


def end_children(pipes: Iterable[Connection], procs: Iterable[BaseProcess], timeout: float = 10.0) -> None:
    for pipe in pipes:
        pipe.close()
    for proc in procs:
        proc.join(timeout)
        if proc.is_alive():
            proc.kill()
            proc.join(5)
