"""One verify worker process, reached over a socket pair of its own: a batch goes as one frame, its answer
comes back as one frame, in order.

    worker = PipeWorker(refusals_in)      # the function the worker runs (importable: it goes by name)
    await worker.start()
    refusals = await worker.call(raws, max_bytes)
    worker.close()

concurrent.futures' process pool would cost the main process 400-975 µs of CPU per batch (a queue-management
thread, a feeder thread, two queues and a future per call). Here a call is one pickled frame written on the
loop's transport and one read back by the worker's reader task: no thread of the main process takes part.

- Process: `python -m node.server.write.verify_worker MODULE:FUNCTION NAME`, its end of the socket pair as
  its standard input, started as the store writer and the read workers are. A plain subprocess rather than
  multiprocessing's spawn, which also starts a resource-tracker process (idle here, ~12 MB) and sends the
  function and the main module's name by pickle. The name (`chain-verify-0`) is in its command line for `ps`.
- Frame: a 4-byte big-endian length, then a pickle. The request is the call's arguments; the answer is
  `(True, result)`, or `(False, "Type: text")` when the function raised (the caller gets `WorkerFailed`).
- A worker takes one request at a time and answers in the order sent; the main process may write the next
  batch before the last is answered (the socket holds it).
- The worker exits at end of file on its socket: when the main process closes its end, and when the main
  process is gone however it ended (kill -9 included: the kernel closes the socket), so no watcher thread
  is needed. It ignores SIGINT: a terminal's Ctrl-C reaches the whole process group, and the main process,
  which drains first, decides.
- A worker that dies (or whose socket breaks) fails every call it had not answered with `BrokenWorker`; the
  caller decides what to do (verify.py verifies the batch inline and starts new workers).
- A worker that answers nothing for `stall_seconds` while calls wait (stopped, deadlocked, starved) is hung:
  it is killed and its calls fail with `BrokenWorker` as if it had died. The first answer gets
  `FIRST_ANSWER_SECONDS` at least, since it waits for the worker's start-up (a new interpreter, imports). A timer
  that fires late because the main process's own loop was blocked gives the reader one more turn before it
  kills: the answer may be sitting in the socket.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import pickle
import signal
import socket
import struct
import subprocess
import sys
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

HEADER = struct.Struct(">I")
ENTRY = "node.server.write.verify_worker"  # this module, run as the worker's main
STALL_SECONDS = 10.0  # a verify batch (at most --max-batch messages) takes milliseconds
FIRST_ANSWER_SECONDS = 60.0  # a new interpreter and its imports, on a loaded machine
LATE_SECONDS = 0.5  # a timer this late means the loop itself was blocked
REAP_SECONDS = 0.1, 60.0  # a broken worker's exit is collected: polled this often, for at most this long


class BrokenWorker(Exception):
    """The worker process died, or its socket broke, before answering."""


class WorkerFailed(Exception):
    """The worker's function raised; the text names the exception."""


def serve(sock: socket.socket, function: Callable[..., Any]) -> None:
    """The worker process's loop: a request frame in, `function(*args)`, an answer frame out; returns at end
    of file."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # the main process went away mid-answer: nobody to tell
    with sock, sock.makefile("rb") as requests, contextlib.suppress(ConnectionError):
        while True:
            head = requests.read(HEADER.size)  # buffered: every byte asked for, or fewer at end of file
            if len(head) < HEADER.size:
                return
            size = HEADER.unpack(head)[0]
            body = requests.read(size)
            if len(body) < size:
                return
            try:
                answer: tuple[bool, Any] = (True, function(*pickle.loads(body)))
            except Exception as exc:  # the caller's failure to handle, not the worker's end
                answer = (False, f"{type(exc).__name__}: {exc}")
            out = pickle.dumps(answer, protocol=pickle.HIGHEST_PROTOCOL)
            sock.sendall(HEADER.pack(len(out)) + out)


class PipeWorker:
    """A worker process running `function`, and the main process's end of its socket pair."""

    def __init__(
        self, function: Callable[..., Any], name: str = "chain-verify", *, stall_seconds: float = STALL_SECONDS
    ) -> None:
        self._function = function
        self._name = name
        self._stall_seconds = stall_seconds
        self._watch: asyncio.TimerHandle | None = None  # armed while calls wait for an answer
        self._watch_since = 0.0  # when the oldest waiting call began to wait for its answer
        self._answered = False
        self._process: subprocess.Popen[bytes] | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._reading: asyncio.Task[None] | None = None
        self._starting: asyncio.Future[None] | None = None
        self._waiting: deque[asyncio.Future[Any]] = deque()
        self.broken = False

    @property
    def pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    async def start(self) -> None:
        """Starts the process (a new interpreter, not a fork: the main process runs gRPC threads, which do not
        survive a fork) and connects to it. Returns before the worker has imported anything: a first call
        waits."""
        ours: socket.socket | None = None
        function = f"{self._function.__module__}:{self._function.__qualname__}"
        try:
            ours, theirs = socket.socketpair()
            with theirs:
                self._process = subprocess.Popen(
                    [sys.executable, "-m", ENTRY, function, self._name],
                    stdin=theirs.fileno(),
                )
            reader, self._writer = await asyncio.open_connection(sock=ours)
        except OSError as exc:  # no process or no socket (out of descriptors, of memory): a broken worker
            if ours is not None:
                ours.close()
            self.broken = True
            raise BrokenWorker(f"{self._name} did not start: {exc}") from exc
        self._reading = asyncio.create_task(self._read(reader), name=f"{self._name}-answers")

    async def ready(self) -> None:
        """Started: the first caller starts the worker, the others wait for the same start (and see its
        failure, BrokenWorker, as it did)."""
        if self._starting is None:
            self._starting = asyncio.ensure_future(self.start())
        await asyncio.shield(self._starting)

    async def call(self, *args: Any) -> Any:
        if self.broken or self._writer is None:
            raise BrokenWorker(f"{self._name} is not running")
        body = pickle.dumps(args, protocol=pickle.HIGHEST_PROTOCOL)
        answer: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting.append(answer)
        if self._watch is None:
            self._arm()
        self._writer.write(HEADER.pack(len(body)) + body)
        ok, value = await answer
        if not ok:
            raise WorkerFailed(value)
        return value

    async def _read(self, reader: asyncio.StreamReader) -> None:
        why = "its socket closed"
        try:
            while True:
                head = await reader.readexactly(HEADER.size)
                body = await reader.readexactly(HEADER.unpack(head)[0])
                answer = self._waiting.popleft()
                if not answer.done():
                    answer.set_result(pickle.loads(body))
                self._answered = True
                self._disarm()
                if self._waiting:
                    self._arm()
        except (asyncio.IncompleteReadError, ConnectionError) as exc:
            why = f"{type(exc).__name__}: {exc}"
        except IndexError:
            why = "an answer nobody asked for"
        finally:
            self._fail(why)

    def _arm(self, wait: float | None = None) -> None:
        """Watch for the next answer: `wait` seconds, or the stall allowance."""
        loop = asyncio.get_running_loop()
        if wait is None:
            wait = self._stall_seconds if self._answered else max(self._stall_seconds, FIRST_ANSWER_SECONDS)
            self._watch_since = loop.time()
        self._watch = loop.call_later(wait, self._stalled)

    def _disarm(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None

    def _stalled(self) -> None:
        assert self._watch is not None  # this call is its timer's
        due, self._watch = self._watch.when(), None
        now = asyncio.get_running_loop().time()
        if now - due > LATE_SECONDS:
            self._arm(LATE_SECONDS)  # the loop was blocked: let the reader take what may have come meanwhile
            return
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
        self.close(f"no answer in {now - self._watch_since:.1f} s; killed")

    def _fail(self, why: str) -> None:
        self._disarm()
        self.broken = True
        while self._waiting:
            answer = self._waiting.popleft()
            if not answer.done():
                answer.set_exception(BrokenWorker(f"{self._name} ended: {why}"))
        self._reap(int(REAP_SECONDS[1] / REAP_SECONDS[0]))  # at once if it has exited (a second call: the same)

    def _reap(self, polls: int) -> None:
        """Collect the exit of a worker that died, was killed or was closed, so that it does not stay a
        zombie until the next worker starts: polled from the loop (no thread waits on it), as it may still
        be finishing a batch when its socket closes."""
        process = self._process
        if process is None or process.poll() is not None or polls <= 0:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # closed outside the loop (shutdown): the process exits with the node's
            return
        loop.call_later(REAP_SECONDS[0], self._reap, polls - 1)

    def close(self, why: str = "closed") -> None:
        """Closes the socket (the worker exits at end of file) and fails what still waits."""
        if self._reading is not None:
            self._reading.cancel()
        if self._writer is not None:
            self._writer.close()
        self._fail(why)  # and its exit collected once it has exited


def main(argv: Sequence[str]) -> None:
    """`python -m node.server.write.verify_worker MODULE:FUNCTION NAME`: serve FUNCTION on the socket that is
    standard input (NAME only labels the process)."""
    module, _, qualname = argv[1].partition(":")
    function: Any = importlib.import_module(module)
    for name in qualname.split("."):
        function = getattr(function, name)
    serve(socket.socket(fileno=0), function)


if __name__ == "__main__":
    main(sys.argv)
