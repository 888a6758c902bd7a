"""The write benches' load clients, each in a process of its own (pre-signed messages from several
client processes, so that no client shares a GIL with another and the load generator is not the bound).

The bench signs every batch first, in its own process; each client process gets its batches as bytes,
decodes them, says it is ready and waits. `run` then starts them all at once and returns when the last
one has sent its last batch.

    clients = ClientProcesses(submit_all, targets, load, rate)   # spawned; every one ready
    result = clients.run()    # result.start, result.finished, result.accepted, result.sent

`submit` is a module-level coroutine function (the child imports it by name; a `functools.partial` of one
pickles too): `submit(target, batches, sent, rate) -> accepted`, noting each message's send time in `sent`
(`time.perf_counter`, CLOCK_MONOTONIC: one clock for every process on Linux, as the watcher's).
`send_all` is how the benches' submits send: paced one batch at a time, or unpaced several in flight.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from bench.children import end_children
from chain.v1 import message_pb2 as pb

Submit = Callable[[str, list[list[pb.Message]], dict[bytes, float], float], Coroutine[Any, Any, int]]
Load = list[list[list[pb.Message]]]  # per client, its batches


@dataclass(frozen=True)
class Submitted:
    start: float  # perf_counter when the clients were told to go
    finished: float  # when the last client had its last batch answered
    accepted: int
    sent: dict[bytes, float]  # message hash -> send time


def _client(submit: Submit, target: str, batches: list[list[bytes]], rate: float, conn: Connection) -> None:
    decoded = [[pb.Message.FromString(raw) for raw in batch] for batch in batches]
    conn.send("ready")
    if conn.recv() != "go":
        return
    sent: dict[bytes, float] = {}
    accepted = asyncio.run(submit(target, decoded, sent, rate))
    conn.send((accepted, time.perf_counter(), sent))


def _note_sent(batch: list[pb.Message], sent: dict[bytes, float]) -> None:
    now = time.perf_counter()
    for m in batch:
        sent[m.hash] = now


async def paced(
    batches: list[list[pb.Message]], sent: dict[bytes, float], rate: float = 0.0
) -> AsyncIterator[list[pb.Message]]:
    """The batches one after another (paced to `rate` msgs/s when given), each message's send time noted."""
    start = time.perf_counter()
    done = 0
    for batch in batches:
        if rate:
            await asyncio.sleep(max(0.0, start + done / rate - time.perf_counter()))
        done += len(batch)
        _note_sent(batch, sent)
        yield batch


async def send_all(
    batches: list[list[pb.Message]],
    sent: dict[bytes, float],
    rate: float,
    in_flight: int,
    send: Callable[[list[pb.Message]], Awaitable[None]],
) -> None:
    """`send` each batch, noting its messages' send times: paced to `rate` msgs/s one at a time, or unpaced
    `in_flight` at a time (lanes each taking the next batch when their call is answered: a node serving
    many clients never waits for the next request)."""
    if in_flight > 1 and rate:
        raise ValueError("a paced client sends one batch at a time")
    if in_flight <= 1:
        async for batch in paced(batches, sent, rate):
            await send(batch)
        return
    todo = iter(batches)  # a plain iterator: each batch goes to exactly one lane

    async def lane() -> None:
        for batch in todo:
            _note_sent(batch, sent)
            await send(batch)

    await asyncio.gather(*(lane() for _ in range(in_flight)))


class ClientProcesses:
    """One process per client of `load`, client i sending to `targets[i % len(targets)]`; `rate` (msgs/s,
    0: as fast as answered) is shared evenly between them."""

    def __init__(self, submit: Submit, targets: list[str], load: Load, rate: float = 0.0) -> None:
        ctx = multiprocessing.get_context("spawn")
        self._procs: list[multiprocessing.process.BaseProcess] = []
        self._conns: list[Connection] = []
        per_client = rate / len(load) if load else 0.0
        try:
            for i, batches in enumerate(load):
                raw = [[m.SerializeToString() for m in batch] for batch in batches]
                mine, theirs = ctx.Pipe()
                proc = ctx.Process(
                    target=_client, args=(submit, targets[i % len(targets)], raw, per_client, theirs), daemon=True
                )
                proc.start()
                theirs.close()
                self._procs.append(proc)
                self._conns.append(mine)
            for conn in self._conns:
                if conn.recv() != "ready":
                    raise RuntimeError("a load client did not start")
        except BaseException:
            self.close()
            raise

    @property
    def pids(self) -> list[int | None]:
        return [proc.pid for proc in self._procs]

    def run(self, timeout: float = 600.0) -> Submitted:
        start = time.perf_counter()
        for conn in self._conns:
            conn.send("go")
        accepted, finished, sent = 0, start, {}
        try:
            for conn in self._conns:
                if not conn.poll(timeout):
                    raise TimeoutError(f"a load client did not finish within {timeout:.0f} s")
                try:
                    count, ended, times = conn.recv()
                except EOFError:  # its submit raised: the traceback is on its stderr
                    raise RuntimeError("a load client failed") from None
                accepted += count
                finished = max(finished, ended)
                sent.update(times)
        finally:
            self.close()  # the others too, when one failed
        return Submitted(start, finished, accepted, sent)

    def close(self) -> None:
        # a client reads its pipe only until "go": once it has answered it exits by itself, and one still
        # sending (the run failed or timed out) would not see the pipe close, so it is killed after 2 s
        end_children(self._conns, self._procs, timeout=2.0)
