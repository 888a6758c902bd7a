"""The node's read workers, kept running by the main process (`chain-node --read-workers N`).

    workers = ReadWorkers(2, settings_for, durations)   # settings_for(index) -> WorkerSettings; durations:
                                                        # the main process's rpc.server.duration (None: off)
    await workers.start()     # every worker serves (a worker that cannot start: ListenError, node stops)
    ...
    await workers.stop()      # SIGTERM, a short grace, then SIGKILL

A worker that exits while the node runs (a crash, kill -9, the OOM killer) is logged and started again,
after a pause that grows from 0.5 s to 10 s while workers keep dying young; the node keeps serving
meanwhile (the kernel gives new connections to the processes still listening, and the main process is
one of them). Workers die with the main process: each watches its stdin pipe, which the kernel closes
when the main process exits however it exits.
"""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import sys
import time
from collections.abc import Callable
from contextlib import suppress

from node.listen import ListenError
from node.observability.histogram import Histogram
from node.server.readers.shipping import replay
from node.server.readers.worker import WorkerSettings
from node.server.write.sizing import Resources, whole_cpus, workers_in_memory

log = logging.getLogger("chain.node")
MAX_AUTO_READ_WORKERS = 4
WORKER_MODULE = "node.server.readers.worker"  # each worker runs `python -m` this (worker.py)
STOP_GRACE = 5.0
PAUSE_MIN, PAUSE_MAX, SETTLED = 0.5, 10.0, 30.0  # restart pauses; a worker alive this long died old


def read_worker_count(flag: int, resources: Resources, verify_workers: int = 0) -> int:
    """`--read-workers`: -1 (the default) is `auto_read_workers` of what the node's `verify_workers` leave of
    the memory limit (they are sized first: both -1 under a tight limit leaves reads fewer); a number is
    taken as given, 0 none."""
    return auto_read_workers(resources.after(verify_workers)) if flag < 0 else flag


def auto_read_workers(res: Resources) -> int:
    """One per whole usable CPU, at most 4, within the memory limit; none on fewer than two CPUs.

    Not one per CPU beyond the first as verify workers are: with workers the main process takes no public
    connection, so the workers are every process that reads, busy under reads while the verify workers are
    busy under writes. On two cores two workers read at about the ceiling of two bare echo processes, one
    worker at about one echo (docs/performance.md, "Reads"); on one CPU a worker only adds a process that
    competes with the main one."""
    cpus = whole_cpus(res)
    return 0 if cpus < 2 else min(cpus, workers_in_memory(res), MAX_AUTO_READ_WORKERS)


class ReadWorkers:
    def __init__(
        self,
        count: int,
        settings_for: Callable[[int], WorkerSettings],
        durations: Histogram | None,
        start_timeout: float = 60.0,
        on_exit: Callable[[], object] | None = None,
    ) -> None:
        """`on_exit`: called after a worker exited while the node runs (the store frees its reader slot)."""
        self.count = count
        self._on_exit = on_exit
        self._settings_for = settings_for
        self._durations = durations
        self._start_timeout = start_timeout
        self._procs: dict[int, asyncio.subprocess.Process] = {}
        self._ready: dict[int, asyncio.Future[None]] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._stopping = False
        self.restarts = 0
        self.calls = dict.fromkeys(range(count), 0)  # calls each worker answered itself (from its metric lines)
        # each worker index's kept answers (answers.py) over the node's life: (hits, misses, bytes kept now),
        # replaced whole (the metrics thread reads it); the hits and misses of the index's earlier processes
        # are its base, which each line's totals for the running process are added to
        self._answers = {i: (0, 0, 0) for i in range(count)}
        self._answers_base = {i: (0, 0) for i in range(count)}

    @property
    def answer_lookups(self) -> dict[int, tuple[int, int]]:
        """Each worker index's lookups of kept answers over the node's life: (hits, misses)."""
        return {i: (hits, misses) for i, (hits, misses, _) in self._answers.items()}

    @property
    def answer_bytes(self) -> dict[int, int]:
        """The bytes of answers each running worker keeps."""
        return {i: kept for i, (_, _, kept) in self._answers.items()}

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self._procs.values() if p.returncode is None]

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._ready = {i: loop.create_future() for i in range(self.count)}
        self._tasks = [asyncio.create_task(self._keep(i), name=f"read-worker-{i}") for i in range(self.count)]
        try:
            await asyncio.wait_for(asyncio.gather(*self._ready.values()), self._start_timeout)
        except (TimeoutError, ListenError):
            await self.stop()
            addr = self._settings_for(0).grpc_addr
            raise ListenError("--read-workers", addr, "a read worker did not start (its lines are above)") from None
        log.info("read workers: %d serving beside the main process (pids %s)", self.count, self.pids)

    async def _spawn(self, index: int) -> asyncio.subprocess.Process:
        settings = self._settings_for(index)
        return await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            WORKER_MODULE,
            settings.encode(),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )

    async def _keep(self, index: int) -> None:
        pause = PAUSE_MIN
        while not self._stopping:
            started = time.monotonic()
            proc = await self._spawn(index)
            self._procs[index] = proc
            await self._follow(index, proc)
            status = await proc.wait()
            self._answers_gone(index)
            if self._stopping:
                return
            first = self._ready[index]
            if not first.done():  # never served: the node does not start
                first.set_exception(ListenError("--read-workers", "", f"worker {index} exited with {status}"))
                return
            if self._on_exit is not None:
                self._on_exit()
            pause = PAUSE_MIN if time.monotonic() - started > SETTLED else min(pause * 2, PAUSE_MAX)
            self.restarts += 1
            log.warning(
                "read worker %d (pid %d) exited with status %d; starting another in %.1f s",
                index,
                proc.pid,
                status,
                pause,
            )
            await asyncio.sleep(pause)

    async def _follow(self, index: int, proc: asyncio.subprocess.Process) -> None:
        """Read the worker's lines until it closes stdout (it exited)."""
        assert proc.stdout is not None
        while line := await proc.stdout.readline():
            try:
                doc = json.loads(line)
            except ValueError:
                continue
            if not isinstance(doc, dict):
                continue
            if doc.get("event") == "worker-ready" and not self._ready[index].done():
                self._ready[index].set_result(None)
            elif doc.get("event") == "rpc" and self._durations is not None and isinstance(doc.get("series"), list):
                self.calls[index] += replay(doc["series"], self._durations)
                self._answers_shipped(index, doc.get("answers"))

    def _answers_shipped(self, index: int, answers: object) -> None:
        """A line's totals of the running worker's kept answers: [hits, misses, bytes] for its life."""
        if isinstance(answers, list) and len(answers) == 3 and all(_count(n) for n in answers):
            base_hits, base_misses = self._answers_base[index]
            self._answers[index] = (base_hits + answers[0], base_misses + answers[1], answers[2])

    def _answers_gone(self, index: int) -> None:
        """The worker at `index` exited: it keeps nothing now, and the next one counts from 0 on top of it."""
        hits, misses, _ = self._answers[index]
        self._answers_base[index] = (hits, misses)
        self._answers[index] = (hits, misses, 0)

    async def stop(self) -> None:
        """Drain every worker (SIGTERM: it stops taking calls, finishes the ones it has for a second)."""
        self._stopping = True
        for proc in self._procs.values():
            if proc.returncode is None:
                with suppress(ProcessLookupError):
                    proc.send_signal(signal.SIGTERM)
        for proc in self._procs.values():
            try:
                await asyncio.wait_for(proc.wait(), STOP_GRACE)
            except TimeoutError:
                with suppress(ProcessLookupError):
                    proc.kill()
                await proc.wait()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with suppress(asyncio.CancelledError):
                await task


def _count(n: object) -> bool:
    return isinstance(n, int) and not isinstance(n, bool) and n >= 0
