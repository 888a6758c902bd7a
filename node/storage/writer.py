"""The store's writer process: block commits off the node's GIL (`chain-node --store-writer process`).

    writer = WriterProcess(path, sync=True)   # spawns `python -m node.storage.writer` (no handshake)
    writer.commit(writes, tree_nodes)          # one block, one LMDB write transaction, in the child
    writer.close()

py-lmdb releases the GIL around every single put of a write transaction, so a commit run in a thread of
the node's own process hands the GIL back and forth with admission about eleven times a message. The child
owns the store's write transactions instead; the parent keeps its environment open for read snapshots
(LMDB serves many processes and serialises writers across them with its own lock, so there is still one
writer). A block's writes go to the child as one pickled frame; the answer is one status byte.

Failure, and what the caller (node.chain.Chain.commit) does with it:
- the disk refuses: `StorageFailed`, nothing written. The child exits after answering, so the next
  attempt starts from a fresh environment (an LMDB environment whose write failed may stay in panic);
- the file is damaged: `WriteDamaged`, which the caller latches as the store's fault;
- the child dies before answering (kill -9, the OOM killer): `WriterLost`. The transaction is atomic, so
  the block is either wholly stored or not at all: the caller reads the stored head to tell which. The next
  commit starts a new child.

The child never outlives the node: it asks the kernel for SIGKILL when its parent dies (also in the middle
of a commit, whose transaction LMDB then discards), and it exits when its input pipe closes. Linux sends
that signal when the *thread* that started the child ends: the first child is started from the node's
main thread, a replacement from the thread that commits (a worker of the event loop's default executor,
which lives as long as the loop).
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import pickle
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO

from node.errors import DataCorrupted, StorageFailed
from node.storage.lmdb_store import LmdbStore

OK, FAILED, DAMAGED, BROKEN = 0, 1, 2, 3  # the child's answer: one status byte, then a 4-byte length and text
HEADER = 8  # a request: the payload's length (big-endian), then the pickled (writes, tree_nodes)
PR_SET_PDEATHSIG = 1
STOP_WAIT = 5.0
DIE_ENV = "CHAIN_TEST_WRITER_DIE"  # tests only: "before" or "after" the first commit the child is sent


class WriterLost(StorageFailed):
    """The writer process exited before it answered: the block may or may not be stored."""


class WriteDamaged(Exception):
    """The writer's LMDB found the store's file damaged (the caller latches it as the store's fault)."""

    def __init__(self, problem: str) -> None:
        super().__init__(problem)
        self.problem = problem


class WriterProcess:
    def __init__(self, path: Path | str, *, sync: bool = True, on_restart: Callable[[], object] | None = None) -> None:
        """`on_restart`: called before a child replaces one that exited (the store frees the dead child's
        LMDB reader slot: every process that opens the environment takes one, and a killed one keeps it)."""
        self.path = Path(path)
        self.sync = sync
        self._on_restart = on_restart
        self.starts = 0
        self._proc: subprocess.Popen[bytes] | None = None
        self._spawn()

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None and self._proc.poll() is None else None

    def _spawn(self) -> None:
        sync = "1" if self.sync else "0"
        argv = [sys.executable, "-m", "node.storage.writer", str(self.path), sync, str(os.getpid())]
        # stderr is the node's: a child that cannot start says why there
        self._proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, close_fds=True)
        self.starts += 1

    def commit(
        self, writes: Mapping[bytes, bytes | None], tree_nodes: Mapping[bytes, bytes], block: int | None = None
    ) -> None:
        """Write one block atomically in the child: StorageFailed (nothing written), WriterLost (the child
        died: stored or not, read the head), WriteDamaged (the file is damaged)."""
        proc = self._proc
        if proc is None or proc.poll() is not None:
            self._reap()
            if self._on_restart is not None:
                self._on_restart()
            self._spawn()
            proc = self._proc
        assert proc is not None and proc.stdin is not None and proc.stdout is not None
        payload = pickle.dumps((writes, tree_nodes, block), protocol=pickle.HIGHEST_PROTOCOL)
        try:
            proc.stdin.write(len(payload).to_bytes(HEADER, "big"))
            proc.stdin.write(payload)
            proc.stdin.flush()
            status, text = _read_answer(proc.stdout)
        except (OSError, EOFError, ValueError):
            proc.kill()  # dead already, or in a state no answer can come from: stored or not, the head tells
            code = proc.wait()
            raise WriterLost(f"the store writer process exited ({_describe(code)}) before it answered") from None
        if status == OK:
            return
        if status == FAILED:
            raise StorageFailed(text)
        if status == DAMAGED:
            raise WriteDamaged(text)
        raise WriterLost(f"the store writer process failed: {text}")

    def _reap(self) -> None:
        proc = self._proc
        if proc is None:
            return
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):  # a write the dead child never read
                    pipe.close()
        proc.wait()
        self._proc = None

    def close(self) -> None:
        """Close its input (the child finishes what it is writing, then exits), then wait; kill if stuck."""
        proc = self._proc
        if proc is None:
            return
        try:
            if proc.stdin is not None:
                proc.stdin.close()
            proc.wait(STOP_WAIT)
        except OSError:
            pass
        except subprocess.TimeoutExpired:
            proc.kill()
        self._reap()


def _read_answer(stream: IO[bytes]) -> tuple[int, str]:
    head = _read_exact(stream, 5)
    return head[0], _read_exact(stream, int.from_bytes(head[1:], "big")).decode()


def _read_exact(stream: IO[bytes], n: int) -> bytes:
    data = stream.read(n)
    if data is None or len(data) < n:
        raise EOFError
    return data


def _describe(code: int) -> str:
    if code < 0:
        return f"killed by {signal.Signals(-code).name}"
    return f"exit status {code}"


# ---- the child ----
def _die_with(parent: int) -> None:
    """SIGKILL when the parent dies (Linux), then make sure it had not died already."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # not Linux: the closed input pipe still ends the child once it is idle
    if os.getppid() != parent:
        os._exit(0)


def _answer(out: IO[bytes], status: int, text: str = "") -> None:
    raw = text.encode()
    out.write(bytes([status]) + len(raw).to_bytes(4, "big") + raw)
    out.flush()


def serve(path: str, sync: bool, inp: IO[bytes], out: IO[bytes]) -> int:
    store = LmdbStore(path, sync=sync)
    try:
        while True:
            head = inp.read(HEADER)
            if not head or len(head) < HEADER:
                return 0  # the node closed the pipe, or exited
            payload = inp.read(int.from_bytes(head, "big"))
            writes, tree_nodes, block = pickle.loads(payload)
            die = os.environ.get(DIE_ENV, "")  # test hook: killed before the transaction, or after it
            if die == "before":
                os._exit(9)
            try:
                store.commit(writes, tree_nodes, block)
            except StorageFailed as exc:
                _answer(out, FAILED, str(exc))
                return 1  # a fresh environment for the next attempt
            except DataCorrupted as exc:
                _answer(out, DAMAGED, str(exc))
                return 1
            except Exception as exc:  # a bug: said to the node, which counts the block as not stored
                _answer(out, BROKEN, f"{type(exc).__name__}: {exc}")
                return 1
            if die == "after":  # stored, never answered
                os._exit(9)
            _answer(out, OK)
    finally:
        store.close()


def main(argv: list[str]) -> int:
    path, sync, parent = argv
    _die_with(int(parent))
    logging.disable(logging.CRITICAL)  # the node logs what the child answers; the child stays quiet
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C reaches the node, which then closes the pipe
    return serve(path, sync == "1", sys.stdin.buffer, sys.stdout.buffer)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
