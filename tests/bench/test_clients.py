"""The write benches' load clients (bench/clients.py): each client is a process of its own, every batch it
was given reaches the server, each message's send time comes back, and a client whose submit fails fails
the run instead of hanging it. The server is bench_node's bare echo in its own process; nothing is timed."""

from __future__ import annotations

import asyncio
import functools
import os
import socket
import threading
import time
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from bench.bench_node import Echo, echo_in_subprocess, run_echo_server, submit_all
from bench.bench_replicated import submit_retrying
from bench.clients import ClientProcesses
from chain.v1 import message_pb2 as pb
from chain.v1 import rpc_pb2


@pytest.fixture
def echo() -> Iterator[str]:
    proc, conn = echo_in_subprocess()
    try:
        yield f"127.0.0.1:{conn.recv()}"
    finally:
        conn.send("stop")
        proc.join(10)


def _load(clients: int, batches: int, per_batch: int) -> list[list[list[pb.Message]]]:
    return [
        [[pb.Message(hash=os.urandom(32)) for _ in range(per_batch)] for _ in range(batches)] for _ in range(clients)
    ]


def test_each_client_runs_in_its_own_process_and_sends_all_it_was_given(echo: str) -> None:
    load = _load(clients=3, batches=4, per_batch=5)
    clients = ClientProcesses(submit_all, [echo], load)
    pids = clients.pids
    assert len(set(pids)) == 3 and os.getpid() not in pids
    result = clients.run(timeout=60)
    hashes = {m.hash for batches in load for batch in batches for m in batch}
    assert result.accepted == len(hashes) == 60
    assert set(result.sent) == hashes
    assert all(result.start <= t <= result.finished for t in result.sent.values())


def test_a_client_that_fails_fails_the_run(echo: str) -> None:
    with socket.socket() as s:  # a loopback port nobody listens on
        s.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{s.getsockname()[1]}"
    clients = ClientProcesses(submit_all, [echo, dead], _load(clients=2, batches=1, per_batch=1))
    with pytest.raises(RuntimeError, match="a load client failed"):
        clients.run(timeout=60)


def test_a_client_that_never_finishes_times_the_run_out_and_every_client_is_ended(echo: str) -> None:
    with socket.socket() as silent:  # listens (connections queue) but never answers: a submit to it hangs
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        target = f"127.0.0.1:{silent.getsockname()[1]}"
        clients = ClientProcesses(submit_all, [target, echo], _load(clients=2, batches=1, per_batch=1))
        pids = clients.pids
        with pytest.raises(TimeoutError, match="did not finish within 2 s"):
            clients.run(timeout=2)
        assert not [pid for pid in pids if Path(f"/proc/{pid}").exists()]  # ended and reaped, the hung one too


AnySubmit = Callable[..., Coroutine[Any, Any, int]]  # a submit with its `in_flight` keyword


class _Overlap(Echo):
    """The echo's answer to each batch after a pause, noting how many calls were open at once at most."""

    def __init__(self) -> None:
        self.open = 0
        self.most = 0
        self.batches = 0

    async def BatchSubmitMessages(
        self, request: rpc_pb2.BatchSubmitMessagesRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> rpc_pb2.BatchSubmitMessagesResponse:
        self.open += 1
        self.most = max(self.most, self.open)
        self.batches += 1
        await asyncio.sleep(0.05)  # long enough that a second lane's call arrives while this one is open
        self.open -= 1
        answer: rpc_pb2.BatchSubmitMessagesResponse = await super().BatchSubmitMessages(request, context)
        return answer


@pytest.mark.parametrize("submit_fn", [submit_all, submit_retrying], ids=["bench_node", "bench_replicated"])
def test_a_client_keeps_its_batches_in_flight_each_sent_once(submit_fn: AnySubmit) -> None:
    servicer = _Overlap()  # type: ignore[abstract]  # only the one call
    ready: list[int] = []
    stop = threading.Event()

    thread = threading.Thread(target=run_echo_server, args=(ready, stop, servicer), daemon=True)
    thread.start()
    try:
        while not ready:
            time.sleep(0.01)
        load = _load(clients=1, batches=9, per_batch=4)
        submit = functools.partial(submit_fn, in_flight=3)
        result = ClientProcesses(submit, [f"127.0.0.1:{ready[0]}"], load).run(timeout=60)
    finally:
        stop.set()
        thread.join(10)
    assert servicer.batches == 9 and result.accepted == 36  # every batch once, none twice
    assert set(result.sent) == {m.hash for batch in load[0] for m in batch}
    assert 1 < servicer.most <= 3  # calls overlapped, never more than the lanes
    with pytest.raises(ValueError, match="paced"):
        asyncio.run(submit_fn("127.0.0.1:1", [], {}, 100.0, in_flight=2))
