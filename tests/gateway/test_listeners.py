"""Exclusive listeners of the gateway: a second chain-gateway on the HTTP or metrics
address of a running one stops with one line naming the flag and the address, a non-zero exit."""

from __future__ import annotations

import os
import subprocess

import pytest
import requests

from tests.fixtures.gwproc import ROOT, GatewayProcess, gateway_command
from tests.fixtures.procs import free_port


@pytest.fixture(scope="module")
def running():
    gw = GatewayProcess(f"127.0.0.1:{free_port()}").start()  # no node needed to listen
    yield gw
    gw.stop()


@pytest.mark.parametrize(("flag", "key"), [("--http-addr", "http_port"), ("--metrics-addr", "metrics_port")])
def test_a_taken_address_stops_a_second_gateway_with_one_line(running: GatewayProcess, flag: str, key: str) -> None:
    taken = f"127.0.0.1:{running.ready[key]}"
    addrs = {"--http-addr": "127.0.0.1:0", "--metrics-addr": "127.0.0.1:0"} | {flag: taken}
    cmd = [*gateway_command(), "--node-addr", f"127.0.0.1:{free_port()}"]
    for f, addr in addrs.items():
        cmd += [f, addr]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run(cmd, check=False, cwd=ROOT, env=env, capture_output=True, text=True, timeout=90)
    assert done.returncode != 0
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert flag in lines[0] and taken in lines[0] and "Traceback" not in done.stderr
    assert requests.get(running.url + "/v1/openapi.json", timeout=10).status_code == 200  # still the first one
