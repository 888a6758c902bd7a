"""Run a real redis-server as a subprocess on a free loopback port, without persistence."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path

from tests.procs import free_port, stop_process

REDIS_SERVER = shutil.which("redis-server") or "/usr/bin/redis-server"


class RedisProcess:
    def __init__(self, work_dir: Path) -> None:
        self.work_dir = work_dir
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 20.0, *, same_port: bool = False) -> RedisProcess:
        """Start (again, on the port it had before when `same_port`); an empty server either way."""
        self.work_dir.mkdir(parents=True, exist_ok=True)
        for _ in range(5):  # the port may be taken between choosing and binding it
            if not (same_port and self.port):
                self.port = free_port()
            cmd = [
                REDIS_SERVER, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                "--dir", str(self.work_dir), "--protected-mode", "no", "--loglevel", "warning",
            ]  # fmt: skip
            self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            if self._wait_ready(timeout):
                return self
            self.stop()
        raise RuntimeError("redis-server did not start")

    def _wait_ready(self, timeout: float) -> bool:
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(16).startswith(b"+PONG"):
                        return True
            except OSError:
                pass
            time.sleep(0.05)
        return False

    def stop(self) -> None:
        stop_process(self.proc, 10)
        self.proc = None
