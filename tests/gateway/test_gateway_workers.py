"""`chain-gateway --workers 2` (gateway/workers.py): one exclusive listener, connections dealt to two
serving processes, each following the node's streams itself.

A real chain-node and a real chain-gateway subprocess with two workers; clients over real sockets. Which
worker holds a stream is read from the parent's /metrics (`chain_sse_clients` with a `worker` label).
"""

from __future__ import annotations

import asyncio
import errno
import os
import socket
import subprocess
import time
from collections.abc import Iterator

import aiohttp
import pytest
import requests

from chain.v1 import message_pb2 as pb
from tests.fixtures.actors import RemoteActor, new_account
from tests.fixtures.events import bio_messages, commit_in_batches, event_ids, sse
from tests.fixtures.gwproc import ROOT, GatewayProcess, gateway_command
from tests.fixtures.nodeproc import NodeProcess
from tests.fixtures.procs import free_port
from tests.fixtures.scrape import scrape


@pytest.fixture(scope="module")
def workers_gw(node: NodeProcess) -> Iterator[GatewayProcess]:
    gw = GatewayProcess(node.grpc_target, args=("--workers", "2", "--sse-heartbeat", "5")).start()
    try:
        yield gw
    finally:
        assert gw.stop() == 0


@pytest.fixture
def actor(node: NodeProcess) -> RemoteActor:
    with node.client() as c:
        return new_account(c, node.authority())


def sse_per_worker(gw: GatewayProcess) -> dict[str, float]:
    out: dict[str, float] = {}
    samples = scrape(int(gw.ready["metrics_port"]))
    for labels, v in samples["chain_sse_clients"]:
        out[labels["worker"]] = out.get(labels["worker"], 0.0) + v
    return out


async def settle(gw: GatewayProcess, total: int) -> dict[str, float]:
    """The open streams per worker once `total` are counted (a stream registers after its headers)."""
    deadline = time.monotonic() + 10
    while True:
        per = await asyncio.to_thread(sse_per_worker, gw)
        if sum(per.values()) == total or time.monotonic() > deadline:
            return per
        await asyncio.sleep(0.1)


async def commit(node: NodeProcess, messages: list[pb.Message], batch: int = 3) -> list[str]:
    def run() -> list[str]:
        with node.client() as c:
            return event_ids(commit_in_batches(c, messages, batch))

    return await asyncio.to_thread(run)


async def test_every_filter_gets_every_event_once_in_order_on_both_workers(
    workers_gw: GatewayProcess, node: NodeProcess, actor: RemoteActor
) -> None:
    with node.client() as c:
        create = actor.b.project_create(f"w-{os.urandom(4).hex()}")
        c.commit(create)
    pid = bytes(create.hash)
    metas = [actor.b.project_metadata(pid, pb.PROJECT_FIELD_DESCRIPTION, f"d{i}") for i in range(4)]
    bios = bio_messages(actor, 4, tag="w")
    urls = {
        "all": f"{workers_gw.url}/v1/events/messages",
        "project": f"{workers_gw.url}/v1/events/messages?project_id=0x{pid.hex()}",
        "bios": f"{workers_gw.url}/v1/events/messages?types=ACCOUNT_DATA",
    }
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True)) as s:
        opened = [(name, sse(s, url)) for name in urls for url in (urls[name], urls[name])]  # two of each
        streams = [(name, await cm.__aenter__()) for name, cm in opened]
        try:
            per = await settle(workers_gw, len(streams))
            assert sorted(per) == ["0", "1"] and all(n >= 2 for n in per.values()), per  # both serve
            meta_ids = await commit(node, metas, batch=2)
            bio_ids = await commit(node, bios, batch=2)
            want = {"all": meta_ids + bio_ids, "project": meta_ids, "bios": bio_ids}
            for name, stream in streams:
                got = await stream.events(len(want[name]), timeout=30)
                assert [e.id for e in got] == want[name], name
            # nothing more (no duplicate) before the next event each filter selects
            (t_meta,) = await commit(node, [actor.b.project_metadata(pid, pb.PROJECT_FIELD_DESCRIPTION, "t")])
            (t_bio,) = await commit(node, bio_messages(actor, 1, "t"))
            nxt = {"all": t_meta, "project": t_meta, "bios": t_bio}
            for name, stream in streams:
                (ev,) = await stream.events(1, timeout=30)
                assert ev.id == nxt[name], name
        finally:
            for _name, cm in opened:
                await cm.__aexit__(None, None, None)


async def test_last_event_id_resume_on_the_other_worker_has_no_gap(
    workers_gw: GatewayProcess, node: NodeProcess, actor: RemoteActor
) -> None:
    url = f"{workers_gw.url}/v1/events/messages?types=ACCOUNT_DATA"
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True)) as s:
        async with sse(s, url) as first:
            per = await settle(workers_gw, 1)
            (held,) = [w for w, n in per.items() if n == 1]
            ids = await commit(node, bio_messages(actor, 6, "r1"))
            got = await first.events(3)
            assert [e.id for e in got] == ids[:3]
            last = got[-1].id
        more = await commit(node, bio_messages(actor, 4, "r2"))  # committed while the client is away
        async with sse(s, url, last_event_id=last) as second:
            per = await settle(workers_gw, 1)
            (now,) = [w for w, n in per.items() if n == 1]
            assert now != held  # the next connection went to the other worker
            rest = await second.events(len(ids) - 3 + len(more))
            assert [e.id for e in rest] == ids[3:] + more
            live = await commit(node, bio_messages(actor, 2, "r3"))
            assert [e.id for e in await second.events(2)] == live


def test_the_port_stays_exclusive_and_health_and_shutdown_work(node: NodeProcess) -> None:
    gw = GatewayProcess(node.grpc_target, args=("--workers", "2")).start()
    try:
        assert gw.ready["workers"] == 2
        health = requests.get(gw.url + "/v1/health", timeout=30)
        assert health.status_code == 200 and health.json()["ready"] is True
        # No SO_REUSEPORT on the listener: a socket asking to share the port is refused.
        with socket.socket() as intruder:
            intruder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            with pytest.raises(OSError) as refused:
                intruder.bind(("127.0.0.1", gw.port))
            assert refused.value.errno == errno.EADDRINUSE
        # A second gateway (with workers too) on the same address stops with one line.
        cmd = [*gateway_command(), "--node-addr", f"127.0.0.1:{free_port()}", "--workers", "2"]
        cmd += ["--http-addr", f"127.0.0.1:{gw.port}", "--metrics-addr", "127.0.0.1:0"]
        done = subprocess.run(
            cmd, check=False, cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True, text=True,
            timeout=90,
        )  # fmt: skip
        assert done.returncode != 0 and done.stdout == ""
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and "--http-addr" in lines[0] and str(gw.port) in lines[0], done.stderr
        assert requests.get(gw.url + "/v1/openapi.json", timeout=10).status_code == 200
        workers = children(gw)
        assert len(workers) == 2
    finally:
        code = gw.stop()
    assert code == 0
    for pid in workers:
        assert not os.path.exists(f"/proc/{pid}")  # stopped and reaped by the parent


def children(gw: GatewayProcess) -> list[int]:
    assert gw.proc is not None
    pid = gw.proc.pid
    with open(f"/proc/{pid}/task/{pid}/children") as f:
        return [int(c) for c in f.read().split()]
