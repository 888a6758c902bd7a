"""The `chain-operator` console script as a process: logs in from a kubeconfig, serves its liveness
endpoint, takes a scheduled snapshot, and stops cleanly on SIGTERM."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import aiohttp

from tests.fixtures.kubecluster import SNAPSHOTS, StatefulSetDouble, live
from tests.fixtures.procs import free_port
from tests.operator.conftest import NAMESPACE, create_network, eventually, network


async def test_console_script_runs_the_operator(cluster, tmp_path):
    sts = StatefulSetDouble(cluster, NAMESPACE, "chain-node", "registry.test/chain-node:1.0", 1, tmp_path)
    await sts.start()
    port = free_port()
    env = dict(
        os.environ,
        CHAIN_OPERATOR_NAMESPACE=NAMESPACE,
        CHAIN_OPERATOR_SNAPSHOT_TICK="0.3",
        CHAIN_OPERATOR_LIVENESS=f"http://127.0.0.1:{port}/healthz",
        CHAIN_OPERATOR_LOG_LEVEL="warning",
    )
    script = Path(sys.executable).parent / "chain-operator"
    proc = subprocess.Popen([str(script)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        await create_network(cluster, network("main", "1.0", 1, every="1h", retention=2))
        await eventually(lambda: live(cluster, SNAPSHOTS, NAMESPACE), 60, "a snapshot from the subprocess")
        async with aiohttp.ClientSession() as session, session.get(f"http://127.0.0.1:{port}/healthz") as resp:
            assert resp.status == 200
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            code = await asyncio.wait_for(asyncio.to_thread(proc.wait), 30)
        except TimeoutError:
            proc.kill()
            raise
        _out, err = proc.communicate()
        await sts.stop()
    assert code == 0, err[-3000:]
    (snap,) = live(cluster, SNAPSHOTS, NAMESPACE).values()
    assert snap["spec"]["pod"] == "chain-node-0"
