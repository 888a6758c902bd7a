"""The write benches' load clients (bench/clients.py): each client is a process of its own, every batch it
was given reaches the server, each message's send time comes back, and a client whose submit fails fails
the run instead of hanging it. The server is bench_node's bare echo in its own process; nothing is timed."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.bench_node import echo_in_subprocess, submit_all
from bench.clients import ClientProcesses
from chain.v1 import message_pb2 as pb


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
