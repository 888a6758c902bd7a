"""Run the real `chain-gateway` console script as a subprocess on a loopback port chosen by the OS.

    gw = GatewayProcess(node.grpc_target, node_web_url=node.web_url, cors_origins=("http://app.test",)).start()
    requests.get(gw.url + "/v1/node/status")
    gw.stop()

The analogue of tests/node/server/nodeproc.py: it waits for the `{"event": "ready", "http_port": N}` line
and keeps the last lines of stderr for failure messages.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tests.procs import start_ready, stop_process

ROOT = Path(__file__).resolve().parents[2]


def gateway_command() -> list[str]:
    """The installed `chain-gateway` script next to this interpreter (else `python -m gateway.main`)."""
    script = Path(sys.executable).parent / "chain-gateway"
    if script.exists():
        return [str(script)]
    found = shutil.which("chain-gateway")
    return [found] if found else [sys.executable, "-m", "gateway.main"]


class GatewayProcess:
    def __init__(
        self,
        *node_addrs: str,
        node_web_url: str = "",
        cors_origins: Sequence[str] = (),
        args: Sequence[str] = (),
        env: dict[str, str] | None = None,
    ) -> None:
        self.node_addrs = node_addrs
        self.node_web_url = node_web_url
        self.cors_origins = tuple(cors_origins)
        self.args = tuple(args)
        self.env = env or {}
        self.proc: subprocess.Popen[str] | None = None
        self.ready: dict[str, Any] = {}
        self.stderr_lines: list[str] = []

    def command(self) -> list[str]:
        cmd = [
            *gateway_command(),
            "--http-addr",
            "127.0.0.1:0",
            "--log-level",
            "warning",
            "--metrics-addr",
            "127.0.0.1:0",
        ]
        for addr in self.node_addrs:
            cmd += ["--node-addr", addr]
        if self.node_web_url:
            cmd += ["--node-web-url", self.node_web_url]
        for origin in self.cors_origins:
            cmd += ["--cors-origin", origin]
        return [*cmd, *self.args]

    def start(self, timeout: float = 30.0) -> GatewayProcess:
        env = dict(os.environ, PYTHONPATH=str(ROOT), **self.env)
        self.proc, self.ready = start_ready(
            self.command(), what="chain-gateway", cwd=ROOT, env=env, stderr_lines=self.stderr_lines, timeout=timeout
        )
        return self

    @property
    def port(self) -> int:
        return int(self.ready["http_port"])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self, timeout: float = 15.0) -> int:
        """SIGTERM, then SIGKILL after `timeout`; returns the exit code."""
        return stop_process(self.proc, timeout)
