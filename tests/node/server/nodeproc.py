"""Run a real chain-node as a subprocess on loopback ports chosen by the OS."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from node.sdk.authority import Authority
from node.sdk.rpc import ChainClient
from tests.procs import start_ready, stop_process

ROOT = Path(__file__).resolve().parents[3]


class NodeProcess:
    def __init__(self, data_dir: Path, *args: str, env: dict[str, str] | None = None) -> None:
        self.data_dir = data_dir
        self.args = args
        self.env = env or {}
        self.proc: subprocess.Popen[str] | None = None
        self.ready: dict[str, Any] = {}
        self.stderr_lines: list[str] = []
        self.signalled = False

    def start(self, timeout: float = 60.0) -> NodeProcess:
        cmd = [
            sys.executable,
            "-m",
            "node.server.main",
            "--data-dir",
            str(self.data_dir),
            "--grpc-addr",
            "127.0.0.1:0",
            "--web-addr",
            "127.0.0.1:0",
            "--admin-addr",
            "127.0.0.1:0",
            "--block-interval",
            "0.05",
            "--drain-seconds",
            "0.5",
            "--metrics-addr",  # never the fixed default port: tests run several nodes at once
            "127.0.0.1:0",
            *self.args,
        ]
        env = dict(os.environ, PYTHONPATH=str(ROOT), **self.env)
        self.proc, self.ready = start_ready(
            cmd, what="chain-node", cwd=ROOT, env=env, stderr_lines=self.stderr_lines, timeout=timeout
        )
        return self

    @property
    def grpc_target(self) -> str:
        return f"127.0.0.1:{self.ready['grpc_port']}"

    @property
    def web_url(self) -> str:
        return f"http://127.0.0.1:{self.ready['web_port']}"

    @property
    def admin_target(self) -> str:
        return f"127.0.0.1:{self.ready['admin_port']}"

    def client(self, **kw: Any) -> ChainClient:
        return ChainClient(self.grpc_target, admin_target=self.admin_target, **kw)

    def authority(self) -> Authority:
        return Authority.load(Path(self.ready["devnet_authority"]))

    def signal(self, sig: int = signal.SIGTERM) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)
        self.signalled = True

    def stop(self, timeout: float = 30.0) -> int:
        return stop_process(self.proc, timeout, signalled=self.signalled)
