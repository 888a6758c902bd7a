"""Real etcd members (the Debian `etcd` binary) as subprocesses on free loopback ports.

cluster = EtcdCluster(tmp_path, size=3).start()
cluster.endpoints        # ["http://127.0.0.1:PORT", ...]
cluster.kill(1); cluster.restart(1)
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

from tests.procs import free_port

ETCD = shutil.which("etcd") or "/usr/bin/etcd"


class EtcdMember:
    def __init__(self, name: str, data_dir: Path, *, fsync: bool = False) -> None:
        self.name = name
        self.fsync = fsync
        self.data_dir = data_dir
        self.client_port = free_port()
        self.peer_port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = data_dir.parent / f"{name}.log"

    @property
    def client_url(self) -> str:
        return f"http://127.0.0.1:{self.client_port}"

    @property
    def peer_url(self) -> str:
        return f"http://127.0.0.1:{self.peer_port}"

    def start(self, initial_cluster: str, state: str = "new") -> None:
        cmd = [
            ETCD, "--name", self.name, "--data-dir", str(self.data_dir),
            "--listen-client-urls", self.client_url, "--advertise-client-urls", self.client_url,
            "--listen-peer-urls", self.peer_url, "--initial-advertise-peer-urls", self.peer_url,
            "--initial-cluster", initial_cluster, "--initial-cluster-state", state,
            "--initial-cluster-token", "chain-test",
            # fast elections for tests; without fsync 2-core CI boxes stay responsive (test data is throwaway)
            "--heartbeat-interval", "50", "--election-timeout", "500",
            "--logger", "zap", "--log-level", "warn",
        ]  # fmt: skip
        if not self.fsync:
            cmd.append("--unsafe-no-fsync")
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=self.log.open("ab"))

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(self.client_url + "/health", timeout=1) as resp:
                return bool(json.loads(resp.read()).get("health") == "true")
        except (OSError, urllib.error.URLError, ValueError):
            return False

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()
        self.proc = None


class EtcdCluster:
    def __init__(self, work_dir: Path, size: int = 1, *, fsync: bool = False) -> None:
        self.work_dir = work_dir
        work_dir.mkdir(parents=True, exist_ok=True)
        self.members = [EtcdMember(f"etcd{i}", work_dir / f"etcd{i}", fsync=fsync) for i in range(size)]

    @property
    def initial_cluster(self) -> str:
        return ",".join(f"{m.name}={m.peer_url}" for m in self.members)

    @property
    def endpoints(self) -> list[str]:
        return [m.client_url for m in self.members]

    @property
    def endpoints_flag(self) -> str:
        return ",".join(self.endpoints)

    def start(self, timeout: float = 30.0) -> EtcdCluster:
        for m in self.members:
            m.start(self.initial_cluster)
        self.wait_healthy(timeout)
        return self

    def wait_healthy(self, timeout: float = 30.0, members: list[int] | None = None) -> None:
        deadline = time.monotonic() + timeout
        wanted = [self.members[i] for i in (members if members is not None else range(len(self.members)))]
        while time.monotonic() < deadline:
            if all(m.healthy() for m in wanted):
                return
            time.sleep(0.1)
        logs = "".join(m.log.read_text()[-2000:] for m in wanted if m.log.exists())
        raise TimeoutError(f"etcd did not become healthy:\n{logs}")

    def kill(self, index: int) -> None:
        self.members[index].kill()

    def restart(self, index: int) -> None:
        """Start a killed member again on its ports with its data dir (it rejoins the cluster)."""
        self.members[index].start(self.initial_cluster, state="existing")

    def stop(self) -> None:
        for m in self.members:
            m.kill()
