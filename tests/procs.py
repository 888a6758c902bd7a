"""Subprocesses for the tests: free loopback ports, starting a program and waiting for its ready line,
and stopping it.

`chain-node` and `chain-gateway` print `{"event": "ready", ...}` on stdout once they serve; stderr is
drained into a list the caller keeps, so a failure can show its last lines.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any


def free_port() -> int:
    """A loopback TCP port that was free a moment ago (for programs that cannot bind port 0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def stop_process(proc: subprocess.Popen[Any] | None, timeout: float, *, signalled: bool = False) -> int:
    """SIGTERM (unless the caller already sent one: a second is not a clean stop), then SIGKILL after
    `timeout`; the exit code (0 when there was no process)."""
    if proc is None:
        return 0
    if proc.poll() is None:
        if not signalled:
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return int(proc.returncode)


def start_ready(
    cmd: Sequence[str],
    *,
    what: str,
    cwd: Path,
    env: Mapping[str, str],
    stderr_lines: list[str],
    timeout: float,
) -> tuple[subprocess.Popen[str], dict[str, Any]]:
    """The running process and its ready document; RuntimeError (with stderr) if it exits first, and on any
    failure the process is killed."""
    proc = subprocess.Popen(
        list(cmd), cwd=cwd, env=dict(env), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    threading.Thread(target=_drain, args=(proc, stderr_lines), daemon=True).start()
    try:
        return proc, _ready_line(proc, what, stderr_lines, timeout)
    except BaseException:
        proc.kill()  # never leave a half-started process behind
        proc.wait()
        raise


def _ready_line(proc: subprocess.Popen[str], what: str, stderr_lines: list[str], timeout: float) -> dict[str, Any]:
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError(f"{what} exited:\n" + "".join(stderr_lines[-40:]))
        if line.startswith("{"):
            doc: dict[str, Any] = json.loads(line)
            if doc.get("event") == "ready":
                return doc
    raise TimeoutError(f"{what} did not become ready")


def _drain(proc: subprocess.Popen[str], into: list[str]) -> None:
    assert proc.stderr is not None
    for line in proc.stderr:
        into.append(line)
