"""`make run` needs only the runtime install: from a clean clone, with npm, helm and apt-get shadowed on the PATH
by scripts that record any call, it builds a runtime-only .venv (uv's dev group left out), says how to put
chainctl and git-remote-chain on the PATH, and starts a devnet node and the gateway on the ports and data
directory given on the make command line; Ctrl-C (SIGINT to the process group) stops both. `make test` still
installs everything the suite needs (dev group, npm packages, helm, Debian packages)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import threading
import time
import urllib.request
from pathlib import Path

from tests.fixtures.nodeproc import ROOT
from tests.fixtures.procs import free_port

SHADOWED = ("npm", "npx", "helm", "apt-get")
PORTS = ("GRPC_PORT", "WEB_PORT", "ADMIN_PORT", "INTERNAL_PORT", "HTTP_PORT", "METRICS_PORT", "GATEWAY_METRICS_PORT")


def shadow_bin(base: Path) -> tuple[str, Path]:
    """A PATH whose npm, npx, helm and apt-get only write their command line to a log and fail."""
    bin_dir = base / "shadow"
    bin_dir.mkdir()
    log = base / "shadowed.log"
    for name in SHADOWED:
        script = bin_dir / name
        script.write_text(f'#!/bin/sh\necho "{name} $*" >> {log}\nexit 127\n')
        script.chmod(0o755)
    return f"{bin_dir}{os.pathsep}{os.environ['PATH']}", log


def dry_run(target: str) -> str:
    """What `make -n -B TARGET` would run: every recipe under TARGET, up to date or not."""
    done = subprocess.run(
        ["make", "-n", "-B", "--no-print-directory", target],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout


def test_run_installs_the_runtime_only():
    plan = dry_run("run")
    assert "uv sync --locked --no-dev --inexact" in plan
    for tool in ("npm", "helm", "install_helm", "apt-get", "dpkg"):
        assert tool not in plan, plan
    assert plan.count("uv sync") == 1, plan


def test_test_installs_what_the_suite_needs():
    plan = dry_run("test")
    assert "uv sync --locked --python" in plan  # uv's default groups: dev
    assert "npm install" in plan
    assert "charts/install_helm.py" in plan
    assert "apt-get install" in plan and "redis-server" in plan
    assert "pytest" in plan


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return int(resp.status) == 200
    except OSError:
        return False


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _wait(what: str, check: object, timeout: float, output: list[str]) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if callable(check) and check():
            return
        time.sleep(0.3)
    raise AssertionError(f"{what} within {timeout} s; make run said:\n" + "".join(output[-60:]))


def test_make_run_from_a_clean_clone_without_npm(tmp_path):
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", "--local", str(ROOT), str(clone)], check=True, timeout=60)
    path, log = shadow_bin(tmp_path)
    ports = {name: free_port() for name in PORTS}
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "UV_PROJECT_ENVIRONMENT", "MAKEFLAGS")}
    env.update(PATH=path, UV_OFFLINE="1")  # the packages come from uv's cache, filled by `make install-test`
    data = tmp_path / "devnet"
    overrides = [f"DATA={data}", *(f"{name}={port}" for name, port in ports.items())]
    proc = subprocess.Popen(
        ["make", "--no-print-directory", "run", *overrides],
        cwd=clone,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own process group, as a terminal's Ctrl-C reaches it
    )
    output: list[str] = []
    assert proc.stdout is not None
    reader = threading.Thread(target=lambda: output.extend(iter(proc.stdout.readline, "")), daemon=True)  # type: ignore[union-attr]
    reader.start()
    try:
        http = f"http://localhost:{ports['HTTP_PORT']}/v1/node/status"
        _wait("the gateway serving the node's status", lambda: _http_ok(http), 180, output)
        venv_bin = clone / ".venv" / "bin"
        assert f'export PATH="{venv_bin}:$PATH"' in "".join(output)
        assert (venv_bin / "chainctl").exists() and (venv_bin / "git-remote-chain").exists()
        assert not (venv_bin / "pytest").exists() and not (venv_bin / "mypy").exists()  # no dev tools
        status = subprocess.run(
            [str(venv_bin / "chainctl"), "--node", f"localhost:{ports['GRPC_PORT']}", "--json", "status"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert status.returncode == 0, status.stderr
        assert (data / "devnet-authority.json").exists()
        for name in ("WEB_PORT", "INTERNAL_PORT", "METRICS_PORT", "GATEWAY_METRICS_PORT"):
            assert _listening(ports[name]), name
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(timeout=60)
        _wait(
            "node and gateway stopped after SIGINT",
            lambda: not any(_listening(ports[n]) for n in ("GRPC_PORT", "HTTP_PORT")),
            30,
            output,
        )
    finally:
        if proc.poll() is None or any(_listening(p) for p in ports.values()):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        reader.join(timeout=10)
    assert not log.exists(), log.read_text()
