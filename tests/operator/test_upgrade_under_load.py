"""A replicated rolling upgrade driven by the operator, behind the real Envoy, under client load, with TLS on
every hop.

Three `chain-node --orderer etcd` members on a real etcd are the pods of a StatefulSet kept in kmock
(tests/fixtures/kubecluster.py plays the StatefulSet controller and the kubelet: a released pod's process is
stopped with SIGTERM - it drains - and started again on its volume with the new image). The real Envoy,
rendered from the shipped envoy/envoy-tls.yaml (only addresses, the health-check interval and the SDS files'
paths changed), fronts the three members on fixed ports, as a Service would. The real operator (kopf) rolls
the network from 1.0 to 1.1 (the soak variant: on to 1.2 as well) through its gates. Client processes
(tests/fixtures/soakload.py) meanwhile send unary calls (SubmitMessage, GetNodeStatus, GetBlock) through
Envoy and hold SubscribeBlocks streams open through it.

TLS, as the chart deploys it: one cluster CA signs every certificate. etcd asks its clients for a certificate
of it; each member serves every listener with its own (names: loopback and the pod's DNS name under the
headless Service) and the members forward and follow each other over mutual TLS; Envoy terminates TLS on its
listener and dials the members over TLS, checking the name `localhost` their certificates carry; the load
clients call Envoy over grpcs:// trusting the CA; the operator calls each pod over TLS checking
`{pod}.{subdomain}.{namespace}.svc` and presenting its client certificate.

What must hold: no unary call fails (retries only where the documented policy allows them: a refusal that
carries `retry-after-ms`); every stream that ends, ends with UNAVAILABLE / DRAINING and resumes from its
last event id with no gap and no repeat; every submission answered "accepted" is committed exactly once;
every member ends on the new image at the same block hash (and state root).

The bounded TLS variant runs in `make test`. `make soak` runs the same bounded load in plaintext (envoy/envoy.yaml,
plaintext members, etcd and operator) and the soak scale over TLS: more clients, longer, two upgrades in a row.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest

from chain.v1 import rpc_pb2
from tests.fixtures.certs import TestCA
from tests.fixtures.envoyproc import TLS_TEMPLATE, EdgeTLS, EnvoyProcess, render, shipped_sds
from tests.fixtures.etcdproc import EtcdCluster
from tests.fixtures.kubecluster import StatefulSetDouble
from tests.fixtures.nodeproc import NodeProcess
from tests.fixtures.procs import free_port, start_ready, stop_process
from tests.fixtures.replicaset import blocks, committed_counts, status
from tests.operator.conftest import NAMESPACE, create_network, eventually, network, network_status, patch_network

ROOT = Path(__file__).resolve().parents[2]
IMAGE = "registry.test/chain-node"
# Envoy checks every 0.5 s and ejects after 2 failures; the node drains 2 s: longer than the ejection window,
# as the chart requires of node.drainSeconds against Envoy's health check (docs/deploy.md section 3).
HEALTH_INTERVAL = "0.5s"
DRAIN_SECONDS = "2"


@dataclass(frozen=True)
class Scale:
    clients: int  # client processes
    unary: int  # unary threads per client
    streams: int  # SubscribeBlocks streams per client
    warmup: float  # seconds of load before the first upgrade and after the last
    versions: tuple[str, ...]
    upgrade_limit: float  # seconds one upgrade may take (a bounded run takes about 20)


BOUNDED = Scale(clients=1, unary=2, streams=3, warmup=3.0, versions=("1.1",), upgrade_limit=180.0)
SOAK = Scale(clients=3, unary=2, streams=4, warmup=20.0, versions=("1.1", "1.2"), upgrade_limit=450.0)
SOAK_MARKS = (pytest.mark.soak, pytest.mark.timeout(1200))  # two upgrades under load: minutes on a loaded box


def member_args(etcd: EtcdCluster) -> list[str]:
    return [
        "--orderer", "etcd", *etcd.node_flags, "--lease-ttl", "2",
        "--block-interval", "0.1", "--empty-block-interval", "1", "--drain-seconds", DRAIN_SECONDS,
    ]  # fmt: skip


def edge_config(ports: list[int], ca: TestCA | None, workdir: Path) -> dict[str, Any]:
    """envoy/envoy.yaml in front of the members' public ports; with a CA envoy/envoy-tls.yaml, its listener
    serving a certificate of the CA and its SDS files pointing at the test's files."""
    nodes = [("127.0.0.1", p) for p in ports]
    if ca is None:
        return render(nodes, health_interval=HEALTH_INTERVAL)
    config = render(nodes, health_interval=HEALTH_INTERVAL, template=TLS_TEMPLATE)
    listener = ca.issue("edge")
    return EdgeTLS(listener.cert, listener.key, ca.cert).install(config, shipped_sds(), workdir / "sds")


def operator_tls(ca: TestCA | None) -> dict[str, Any]:
    """The operator's TLS to the pods: the CA and a client certificate of it (none in plaintext)."""
    if ca is None:
        return {}
    leaf = ca.issue("operator")
    return {"node_ca_file": ca.cert, "node_tls_cert": leaf.cert, "node_tls_key": leaf.key}


class Clients:
    """Load client processes; `finish()` stops them and sums their reports."""

    def __init__(self, workdir: Path, target: str, authority: Path, scale: Scale, ca_file: Path | None) -> None:
        self.workdir = workdir
        self.target = target
        self.ca_file = ca_file
        self.authority = authority
        self.scale = scale
        self.stop_file = workdir / "stop"
        self.procs: list[Any] = []
        self.stderr: list[list[str]] = []

    def start_one(self, index: int) -> None:
        cmd = [
            sys.executable, "-m", "tests.fixtures.soakload", "--target", self.target,
            "--authority", str(self.authority), "--stop", str(self.stop_file),
            "--out", str(self.workdir / f"client{index}.json"), "--unary", str(self.scale.unary),
            "--streams", str(self.scale.streams), "--seed", str(index),
            *(("--ca-file", str(self.ca_file)) if self.ca_file is not None else ()),
        ]  # fmt: skip
        lines: list[str] = []
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        proc, _ = start_ready(cmd, what="soak client", cwd=ROOT, env=env, stderr_lines=lines, timeout=120)
        self.procs.append(proc)
        self.stderr.append(lines)

    def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        for i in range(self.scale.clients):
            self.start_one(i)

    def finish(self) -> dict[str, Any]:
        self.stop_file.touch()
        total: dict[str, Any] = {"calls": Counter(), "retried": Counter(), "failed": [], "accepted": []}
        total.update(events=0, resumed=0, unclean=[], gaps=[])
        for i, proc in enumerate(self.procs):
            code = proc.wait(60)
            assert code == 0, "".join(self.stderr[i][-40:])
            report = json.loads((self.workdir / f"client{i}.json").read_text())
            for key in ("calls", "retried"):
                total[key].update(report[key])
            for key in ("failed", "accepted", "unclean", "gaps"):
                total[key] += report[key]
            total["events"] += report["events"]
            total["resumed"] += report["resumed"]
        return total

    def kill(self) -> None:
        self.stop_file.touch()
        for proc in self.procs:
            stop_process(proc, 30)


def running(sts: StatefulSetDouble) -> list[NodeProcess]:
    procs = [sts.procs[i] for i in range(sts.replicas)]
    assert all(p is not None for p in procs)
    return [p for p in procs if p is not None]


def whereabouts(nodes: list[NodeProcess], missing: set[bytes]) -> list[str]:
    """What each member says of (up to five) messages missing from the chain: found, or NOT_FOUND's details
    (which name the block and reason of a message dropped there)."""
    lines = []
    for digest in sorted(missing)[:5]:
        for i, node in enumerate(nodes):
            with node.client() as c:
                try:
                    found = c.stub.GetMessage(rpc_pb2.GetMessageRequest(hash=digest), timeout=5)
                    lines.append(f"{digest.hex()} n{i}: in block {found.message.block_number}")
                except grpc.RpcError as err:
                    lines.append(f"{digest.hex()} n{i}: {err.code().name} {err.details()}")
    return lines


def wait_committed(nodes: list[NodeProcess], accepted: list[str], timeout: float = 60.0) -> tuple[int, Counter[bytes]]:
    """Scan the chain (of the first member) until every accepted hash is in it; the height scanned and the
    count of each message."""
    node = nodes[0]
    counts: Counter[bytes] = Counter()
    scanned = 0
    deadline = time.monotonic() + timeout
    wanted = {bytes.fromhex(h) for h in accepted}
    while True:
        height = status(node).block_height
        if height > scanned:
            counts.update(committed_counts(blocks(node, height, first=scanned + 1)))
            scanned = height
        missing = wanted - set(counts)
        if not missing:
            return scanned, counts
        if time.monotonic() > deadline:
            raise AssertionError(f"{len(missing)} accepted messages never committed: {whereabouts(nodes, missing)}")
        time.sleep(0.5)


def same_block_everywhere(nodes: list[NodeProcess], height: int, timeout: float = 60.0) -> rpc_pb2.GetBlockResponse:
    deadline = time.monotonic() + timeout
    while min(status(n).block_height for n in nodes) < height:
        assert time.monotonic() < deadline, [status(n).block_height for n in nodes]
        time.sleep(0.1)
    found = []
    for n in nodes:
        with n.client() as c:
            found.append(c.stub.GetBlock(rpc_pb2.GetBlockRequest(block_number=height)))
    for other in found[1:]:
        assert other.block.hash == found[0].block.hash
        assert other.block.header.state_root == found[0].block.header.state_root
    return found[0]


def upgrading_reason(cluster: Any) -> str:
    conds = network_status(cluster, "main").get("conditions", [])
    return next((str(c["reason"]) for c in conds if c["type"] == "Upgrading"), "")


async def upgrade_to(cluster: Any, sts: StatefulSetDouble, version: str, reasons: Counter[str], limit: float) -> float:
    """Ask for `version`; wait until the operator records it (at most `limit` seconds), counting the
    Upgrading reasons seen every 0.5 s. The seconds it took."""
    started = time.monotonic()
    before = len(sts.replaced)
    await patch_network(cluster, "main", {"spec": {"version": version}})
    while network_status(cluster, "main").get("currentVersion") != version:
        assert not sts.failures, sts.failures
        assert time.monotonic() - started < limit, f"{version} not reached: {upgrading_reason(cluster)}"
        reasons[upgrading_reason(cluster)] += 1
        await asyncio.sleep(0.5)
    image = f"{IMAGE}:{version}"
    assert sts.replaced[before:] == [(f"chain-node-{i}", image) for i in (2, 1, 0)]
    assert network_status(cluster, "main")["upgrade"]["phase"] == "Completed"
    return time.monotonic() - started


@dataclass(frozen=True)
class Variant:
    scale: Scale
    tls: bool


@pytest.mark.parametrize(
    "variant",
    [
        pytest.param(Variant(BOUNDED, tls=True), id="bounded-tls"),
        pytest.param(Variant(BOUNDED, tls=False), id="bounded-plaintext", marks=SOAK_MARKS),
        pytest.param(Variant(SOAK, tls=True), id="soak-tls", marks=SOAK_MARKS),
    ],
)
async def test_replicated_upgrade_under_load_behind_envoy(cluster, start_operator, tmp_path, variant: Variant) -> None:
    scale = variant.scale
    ca = TestCA.make(tmp_path / "pki") if variant.tls else None
    etcd = EtcdCluster(tmp_path / "etcd", 1, tls=ca or False).start()
    ports = [free_port() for _ in range(3)]
    fixed = {i: ["--grpc-addr", f"127.0.0.1:{ports[i]}", "--node-id", f"n{i}"] for i in range(3)}
    sts = StatefulSetDouble(
        cluster, NAMESPACE, "chain-node", f"{IMAGE}:1.0", 3, tmp_path / "pods",
        node_args=member_args(etcd), ordinal_args=fixed, genesis_first=True, tls=ca,
    )  # fmt: skip
    envoy: EnvoyProcess | None = None
    clients: Clients | None = None
    t0 = time.monotonic()
    try:
        await sts.start()
        config = edge_config(ports, ca, tmp_path / "envoy")
        envoy = await asyncio.to_thread(EnvoyProcess(config, tmp_path / "envoy").start, 3)
        await start_operator(max_lag_blocks=10, stable_checks=3, stable_interval=0.5, **operator_tls(ca))
        await create_network(cluster, network("main", "1.0", 3))
        await eventually(lambda: network_status(cluster, "main").get("currentVersion") == "1.0", 60, "1.0")
        authority = Path(running(sts)[0].ready["devnet_authority"])
        target = f"grpcs://{envoy.target}" if ca is not None else envoy.target
        clients = Clients(tmp_path / "clients", target, authority, scale, ca.cert if ca is not None else None)
        started = time.monotonic()
        await asyncio.to_thread(clients.start)
        await asyncio.sleep(scale.warmup)
        reasons: Counter[str] = Counter()
        upgrades = [await upgrade_to(cluster, sts, v, reasons, scale.upgrade_limit) for v in scale.versions]
        await asyncio.sleep(scale.warmup)
        total = await asyncio.to_thread(clients.finish)
        duration = time.monotonic() - started
        clients = None

        nodes = running(sts)
        assert all(sts.pod_image(i) == f"{IMAGE}:{scale.versions[-1]}" for i in range(3))
        scanned, counts = await asyncio.to_thread(wait_committed, nodes, total["accepted"])
        head = await asyncio.to_thread(same_block_everywhere, nodes, scanned)
        figures = {
            "setup_s": round(started - t0, 1),
            "duration_s": round(duration, 1),
            "upgrade_s": [round(u, 1) for u in upgrades],
            "upgrading_samples": dict(reasons),
            "calls": dict(total["calls"]),
            "failed": len(total["failed"]),
            "retried": dict(total["retried"]),
            "accepted": len(total["accepted"]),
            "stream_events": total["events"],
            "streams_resumed": total["resumed"],
            "height": head.block.header.number,
        }
        print("upgrade under load:", json.dumps(figures))
        assert total["failed"] == [], total["failed"][:20]
        assert total["unclean"] == [], total["unclean"][:20]
        assert total["gaps"] == [], total["gaps"][:20]
        # Streams were open on the members that drained: some ended with DRAINING and resumed.
        assert total["resumed"] >= 1
        assert total["calls"]["SubmitMessage"] > 0 and total["calls"]["GetBlock"] > 0
        assert all(counts[bytes.fromhex(h)] == 1 for h in total["accepted"])
    finally:
        if clients is not None:
            await asyncio.to_thread(clients.kill)
        if envoy is not None:
            envoy.stop()
        await sts.stop()
        sts.write_logs(tmp_path / "logs")
        etcd.stop()
