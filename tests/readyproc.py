"""Start one of the project's programs as a subprocess and wait for its JSON ready line.

`chain-node` and `chain-gateway` print `{"event": "ready", ...}` on stdout once they serve; stderr is
drained into a list the caller keeps, so a failure can show its last lines.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any


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
