"""A verify worker over its own socket pair (node/server/write/verify_worker.py): answers in order, a raised
exception comes back as WorkerFailed and the worker goes on, a worker killed with -9 fails what it had not
answered with BrokenWorker, a closed worker exits (quietly, even in the middle of a call), a worker silent
past its stall allowance is killed (a busy one is not), a dead or killed worker's exit is collected (no
zombie waits for the next worker to start); and the Verifier verifies a batch inline when its
worker died or hung, then starts a new one."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import time
from pathlib import Path

import pytest

from node.server.write.verify import INLINE_BELOW, Verifier
from node.server.write.verify_worker import BrokenWorker, PipeWorker, WorkerFailed
from tests.fixtures.procs import alive, wait_until
from tests.harness import Harness, commit_meta


def reaped(pid: int) -> bool:
    """The process's exit was collected: not even a zombie is left (`alive` counts a zombie as gone)."""
    return not Path(f"/proc/{pid}").exists()


def echo_after(value: bytes, seconds: float) -> bytes:
    """Runs in the worker: `value` back after `seconds`; raises for b"raise"."""
    time.sleep(seconds)
    if value == b"raise":
        raise ValueError("asked to")
    return value[::-1]


async def test_calls_are_answered_in_order_and_a_raise_comes_back_as_worker_failed() -> None:
    worker = PipeWorker(echo_after, name="test-worker")
    try:
        await worker.start()
        values = [bytes([n]) * (n + 1) for n in range(20)] + [b"x" * (3 << 20)]  # one frame larger than a recv
        answers = await asyncio.gather(*(worker.call(v, 0.001 * (n % 3)) for n, v in enumerate(values)))
        assert answers == [v[::-1] for v in values]
        with pytest.raises(WorkerFailed, match="ValueError: asked to"):
            await worker.call(b"raise", 0.0)
        assert await worker.call(b"after", 0.0) == b"retfa"  # the worker goes on
        assert not worker.broken
    finally:
        worker.close()


async def test_a_worker_killed_mid_call_fails_its_calls_and_a_closed_one_exits() -> None:
    worker = PipeWorker(echo_after, name="test-worker")
    other = PipeWorker(echo_after, name="test-worker")
    try:
        await worker.start()
        await other.start()
        assert await worker.call(b"up", 0.0) == b"pu"
        waiting = [asyncio.ensure_future(worker.call(b"slow", 5.0)) for _ in range(3)]
        await asyncio.sleep(0.2)
        assert worker.pid is not None
        dead = worker.pid
        os.kill(dead, signal.SIGKILL)
        for call in waiting:
            with pytest.raises(BrokenWorker):
                await asyncio.wait_for(call, 10)
        assert worker.broken
        assert await asyncio.to_thread(wait_until, lambda: reaped(dead), 10)  # not left a zombie
        with pytest.raises(BrokenWorker):
            await worker.call(b"again", 0.0)  # refused at once, not written to a dead socket
        assert await other.call(b"ok", 0.0) == b"ko"
        pid = other.pid
        assert pid is not None
        other.close()  # end of file on its socket: the worker returns
        assert await asyncio.to_thread(wait_until, lambda: not alive(pid), 30)
    finally:
        worker.close()
        other.close()


async def test_a_worker_closed_mid_call_exits_without_a_traceback(capfd: pytest.CaptureFixture[str]) -> None:
    """The main process closes (or loses) its end while the worker computes: the worker's answer finds no
    reader, and it exits quietly (its stderr is the node's log)."""
    worker = PipeWorker(echo_after, name="test-worker")
    try:
        await worker.start()
        assert await worker.call(b"up", 0.0) == b"pu"
        waiting = asyncio.ensure_future(worker.call(b"y" * 300_000, 1.0))
        await asyncio.sleep(0.3)
        pid = worker.pid
        assert pid is not None
        worker.close()
        with pytest.raises(BrokenWorker):
            await waiting
        assert await asyncio.to_thread(wait_until, lambda: not alive(pid), 30)
    finally:
        worker.close()
    assert "Traceback" not in capfd.readouterr().err


async def test_workers_that_cannot_start_leave_the_batch_to_the_inline_path(
    tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Out of descriptors (no socket pair): the batch is verified inline; the next start, once possible, works."""
    h = Harness(tmp_path / "chain")
    alice = h.actor()
    msgs = [alice.b.commit_bundle(b"\x02" * 32, [commit_meta(i)]) for i in range(INLINE_BELOW)]
    msgs[2].signature = bytes(64)
    pooled = Verifier(1, 256 * 1024)
    inline = Verifier(0, 256 * 1024)

    def no_socket() -> None:
        raise OSError(24, "Too many open files")

    try:
        want = await inline.verify(msgs)
        with monkeypatch.context() as patch:
            patch.setattr(socket, "socketpair", no_socket)  # the one verify_worker.py makes
            assert await pooled.verify(msgs) == want
            assert pooled.worker_pids == []
        assert await pooled.verify(msgs) == want  # on a new worker, started by this call
        assert len(pooled.worker_pids) == 1
    finally:
        pooled.close()
        inline.close()
        h.chain.close()


async def test_a_worker_that_stops_answering_is_killed_and_a_busy_one_is_not() -> None:
    """A worker stopped (SIGSTOP) while calls wait is hung: after the stall allowance it is killed and every
    call it had not answered fails with BrokenWorker. A worker busy for longer than the allowance in all, but
    answering within it each time, is left alone: the clock restarts at each answer."""
    stopped = PipeWorker(echo_after, name="test-worker", stall_seconds=1.0)
    busy = PipeWorker(echo_after, name="test-worker", stall_seconds=1.0)
    pid = None
    try:
        await stopped.start()
        await busy.start()
        assert await stopped.call(b"up", 0.0) == b"pu"  # past the start-up's longer allowance
        assert await busy.call(b"up", 0.0) == b"pu"
        assert await asyncio.gather(*(busy.call(b"ab", 0.6) for _ in range(5))) == [b"ba"] * 5  # 3 s in all
        assert not busy.broken
        pid = stopped.pid
        assert pid is not None
        os.kill(pid, signal.SIGSTOP)
        waiting = [asyncio.ensure_future(stopped.call(b"x", 0.0)) for _ in range(3)]
        for call in waiting:
            with pytest.raises(BrokenWorker, match="no answer in"):
                await asyncio.wait_for(call, 30)
        assert stopped.broken
        assert await asyncio.to_thread(wait_until, lambda: not alive(pid), 30)
        assert await asyncio.to_thread(wait_until, lambda: reaped(pid), 10)  # no new worker started since
        assert await busy.call(b"still", 0.0) == b"llits"
    finally:
        stopped.close()
        busy.close()
        if pid is not None and alive(pid):
            os.kill(pid, signal.SIGKILL)


async def test_a_timer_made_late_by_a_blocked_loop_spares_a_worker_that_answered() -> None:
    """The main process's loop is blocked past the stall allowance while the worker answers: the answer waits
    unread in the socket when the late timer fires, and the worker is given the reader's turn, not killed."""
    worker = PipeWorker(echo_after, name="test-worker", stall_seconds=0.5)
    try:
        await worker.start()
        assert await worker.call(b"up", 0.0) == b"pu"
        call = asyncio.ensure_future(worker.call(b"ab", 0.1))
        await asyncio.sleep(0)  # the call is written and its timer armed
        time.sleep(1.5)  # blocks the loop: the answer arrives meanwhile, the timer becomes a second late
        assert await asyncio.wait_for(call, 10) == b"ba"
        assert not worker.broken
    finally:
        worker.close()


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGSTOP], ids=["died", "hung"])
async def test_the_verifier_verifies_inline_past_a_dead_or_hung_worker_then_starts_a_new_one(
    tmp_path, sig: signal.Signals
) -> None:
    """A worker killed, or stopped (its stall allowance then kills it): the batch gets the inline path's
    verdicts, and the next goes to a new worker."""
    h = Harness(tmp_path / "chain")
    alice = h.actor()
    msgs = [alice.b.commit_bundle(b"\x01" * 32, [commit_meta(i)]) for i in range(INLINE_BELOW * 2)]
    msgs[5].signature = bytes(64)
    pooled = Verifier(1, 256 * 1024, stall_seconds=1.0)
    inline = Verifier(0, 256 * 1024)
    first = None
    try:
        await pooled.warm_up()
        want = await inline.verify(msgs)
        assert await pooled.verify(msgs) == want
        [first] = pooled.worker_pids
        os.kill(first, sig)
        if sig == signal.SIGKILL:
            assert await asyncio.to_thread(wait_until, lambda: not alive(first), 30)
            await asyncio.sleep(0.1)  # the worker's end of file reaches the reader task
        assert await asyncio.wait_for(pooled.verify(msgs), 30) == want  # inline, while a new worker is made
        assert await asyncio.to_thread(wait_until, lambda: not alive(first), 30)
        assert await pooled.verify(msgs) == want  # on the new worker
        [second] = pooled.worker_pids
        assert second != first and alive(second)
    finally:
        pooled.close()
        inline.close()
        h.chain.close()
        if first is not None and alive(first):
            os.kill(first, signal.SIGKILL)
