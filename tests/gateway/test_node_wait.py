"""A gateway started before its node (as `make run` starts them) waits quietly: one info line, no warnings
or tracebacks while the node starts, and it serves REST and SSE once the node is up. A node that goes away
after having been up is still reported as a warning.

Real processes: the `chain-gateway` console script first, on a node address nobody serves yet, then a
`chain-node` subprocess on that address; with the in-process relay and with Redis (a real redis-server), whose
relays wait for the node the same way.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import requests

from tests.fixtures.gwproc import GatewayProcess
from tests.fixtures.nodeproc import NodeProcess
from tests.fixtures.procs import free_port
from tests.fixtures.redisproc import RedisProcess

PATIENCE = 90.0  # seconds a step may take on a loaded machine (a bound, not a measurement)
ALARM = re.compile(r"\b(WARNING|ERROR|CRITICAL)\b|Traceback")


def wait_for_line(lines: list[str], pattern: str) -> None:
    deadline = time.monotonic() + PATIENCE
    while not any(pattern in line for line in lines):
        assert time.monotonic() < deadline, f"no {pattern!r} in:\n" + "".join(lines[-40:])
        time.sleep(0.1)


def wait_until(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + PATIENCE
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


@pytest.mark.parametrize("with_redis", [False, True], ids=["in-process", "redis"])
def test_the_gateway_waits_quietly_for_a_node_that_starts_later(tmp_path: Path, with_redis: bool) -> None:
    address = f"127.0.0.1:{free_port()}"
    redis = RedisProcess(tmp_path / "redis").start() if with_redis else None
    flags = ("--log-level", "info", *(("--redis-url", redis.url) if redis else ()))
    node: NodeProcess | None = None
    gateway = GatewayProcess(address, args=flags)
    try:
        gateway.start()
        wait_for_line(gateway.stderr_lines, f"waiting for node at {address}")
        node = NodeProcess(tmp_path / "node", "--grpc-addr", address).start()
        wait_for_line(gateway.stderr_lines, f"node at {address} is up")

        status = requests.get(gateway.url + "/v1/node/status", timeout=30)
        assert status.status_code == 200, status.text
        with requests.get(gateway.url + "/v1/events/blocks", stream=True, timeout=30) as stream:
            assert stream.status_code == 200  # the feed reached the node: its hub is ready
        started = list(gateway.stderr_lines)
        assert [line for line in started if ALARM.search(line)] == []
        assert len([line for line in started if "waiting for node" in line]) == 1

        node.stop()
        wait_until(lambda: any(ALARM.search(line) for line in gateway.stderr_lines), "no warning once the node left")
    finally:
        if node is not None:
            node.stop()
        gateway.stop()
        if redis is not None:
            redis.stop()
