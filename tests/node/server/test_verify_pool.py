"""The verify worker pool warms up in the background (the node serves without waiting for a worker to spawn)
and still verifies a large batch exactly like the inline path, bad signatures included; a verify worker
killed with -9 under load loses no submission, nor does one that hangs; a node killed with -9 leaves no
worker behind."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

from chain.v1 import rpc_pb2
from node.server.write.verify import INLINE_BELOW, Verifier
from tests.fixtures.actors import new_account
from tests.fixtures.nodeproc import NodeProcess
from tests.fixtures.procs import alive, children, wait_until
from tests.harness import Harness, commit_meta


async def test_a_large_batch_after_a_background_warm_up_gets_the_inline_verdicts(tmp_path) -> None:
    h = Harness(tmp_path / "chain")
    alice = h.actor()
    msgs = [alice.b.commit_bundle(b"\x01" * 32, [commit_meta(i)]) for i in range(INLINE_BELOW * 2)]
    msgs[3].signature = bytes(64)  # one forged signature in the batch
    pooled = Verifier(1, 256 * 1024)
    inline = Verifier(0, 256 * 1024)
    try:
        pooled.start_warm_up()  # returns at once; the batch below waits for the worker if it is not up yet
        got = await pooled.verify(msgs)
        want = await inline.verify(msgs)
    finally:
        pooled.close()
        inline.close()
        h.chain.close()
    assert got == want
    assert [v.reason != "" for v in got].count(True) == 1 and got[3].reason != ""


def _verify_workers(pid: int) -> list[int]:
    """The node's verify workers (node.server.write.verify_worker run as a process)."""
    found = []
    for child in children(pid):
        try:
            cmdline = Path(f"/proc/{child}/cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if "node.server.write.verify_worker" in cmdline:
            found.append(child)
    return found


def test_a_verify_worker_killed_under_load_loses_no_submission(tmp_path: Path) -> None:
    """kill -9 of the verify worker while batches stream in: every batch gets its answer (what the dead worker
    had not answered is verified inline), the one forged signature of each is refused and the rest committed,
    and a new worker takes the batches after."""
    node = NodeProcess(tmp_path / "data", "--verify-workers", "1").start(timeout=120)
    assert node.proc is not None
    main = node.proc.pid
    try:
        assert wait_until(lambda: bool(_verify_workers(main)), timeout=120)
        [first] = _verify_workers(main)
        client = node.client()
        alice = new_account(client, node.authority(), units=5)
        answered: list[list[rpc_pb2.SubmitResult]] = []
        tenth = threading.Event()

        def load() -> None:
            for n in range(24):
                msgs = [alice.b.follow(os.urandom(20)) for _ in range(INLINE_BELOW * 2 + 8)]
                msgs[7].signature = bytes(64)
                answered.append(client.batch(msgs))
                if n == 10:
                    tenth.set()

        sender = threading.Thread(target=load, name="load")
        sender.start()
        assert tenth.wait(120)
        os.kill(first, signal.SIGKILL)  # batches are in flight now, or come right after
        sender.join(120)
        assert not sender.is_alive() and len(answered) == 24
        for results in answered:
            refused = [(r.index, r.reason_code) for r in results if not r.accepted]
            assert refused == [(7, "INVALID_SIGNATURE")], refused
        for results in (answered[0], answered[11], answered[-1]):
            for r in results:
                if r.accepted:
                    client.wait_committed(r.hash)
        assert wait_until(lambda: any(p != first for p in _verify_workers(main)), timeout=60)
        assert any("a verify worker ended" in line for line in node.stderr_lines)
    finally:
        node.stop()


def test_a_hung_verify_worker_is_killed_and_its_batch_answered(tmp_path: Path) -> None:
    """A verify worker stopped (SIGSTOP) holds the batch sent to it: after --verify-stall-seconds of silence
    the node kills it, verifies the batch inline (the forged signature refused, the rest committed), logs the
    error, and a new worker takes the batches after."""
    node = NodeProcess(tmp_path / "data", "--verify-workers", "1", "--verify-stall-seconds", "2").start(timeout=120)
    assert node.proc is not None
    main = node.proc.pid
    first = 0
    try:
        assert wait_until(lambda: bool(_verify_workers(main)), timeout=120)
        [first] = _verify_workers(main)
        client = node.client()
        alice = new_account(client, node.authority(), units=5)
        warm = client.batch([alice.b.follow(os.urandom(20)) for _ in range(INLINE_BELOW * 2)])  # answered by it
        assert all(r.accepted for r in warm)
        os.kill(first, signal.SIGSTOP)
        for _ in range(2):  # the first batch waits out the stall; the second goes to the new worker
            msgs = [alice.b.follow(os.urandom(20)) for _ in range(INLINE_BELOW * 2 + 8)]
            msgs[7].signature = bytes(64)
            results = client.batch(msgs)
            assert [(r.index, r.reason_code) for r in results if not r.accepted] == [(7, "INVALID_SIGNATURE")]
            client.wait_committed(results[0].hash)
        assert wait_until(lambda: not alive(first), timeout=30)
        assert wait_until(lambda: any(p != first for p in _verify_workers(main)), timeout=60)
        assert any("a verify worker ended" in line and "no answer in" in line for line in node.stderr_lines)
    finally:
        node.stop()
        if first and alive(first):
            os.kill(first, signal.SIGKILL)


def test_a_killed_node_leaves_no_verify_worker(tmp_path: Path) -> None:
    node = NodeProcess(tmp_path / "data", "--verify-workers", "1").start(timeout=120)
    assert node.proc is not None
    main = node.proc.pid
    workers: list[int] = []
    try:
        assert wait_until(lambda: bool(_verify_workers(main)), timeout=120)  # the background warm-up spawned it
        workers = _verify_workers(main)
        os.kill(main, signal.SIGKILL)  # no orderly stop: nobody shuts the pool down
        node.proc.wait(30)
        assert wait_until(lambda: not any(alive(w) for w in workers), timeout=30), workers
    finally:
        node.stop()
        for pid in workers:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_ctrl_c_to_the_whole_process_group_stops_the_node_without_a_worker_traceback(tmp_path: Path) -> None:
    """A terminal's Ctrl-C sends SIGINT to every process of the group: the node, its verify worker, its read
    worker and its store writer. The node drains and exits 0; no child prints a KeyboardInterrupt."""
    node = NodeProcess(tmp_path / "data", "--verify-workers", "1", "--read-workers", "1").start(timeout=120)
    assert node.proc is not None
    main = node.proc.pid
    assert wait_until(lambda: bool(_verify_workers(main)), timeout=120)
    group = [main, *children(main)]
    for pid in group:
        os.kill(pid, signal.SIGINT)
    node.signalled = True
    assert node.stop(timeout=60) == 0
    assert wait_until(lambda: not any(alive(p) for p in group), timeout=30)
    text = "".join(node.stderr_lines)
    assert "KeyboardInterrupt" not in text and "Traceback" not in text, text[-3000:]
