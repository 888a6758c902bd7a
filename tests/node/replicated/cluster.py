"""Replicated chain-node processes on one etcd cluster, and a retrying load client.

nodes = ReplicaSet(tmp_path, etcd).start(3)
nodes.leader_index(); nodes.kill(i); nodes.restart(i)
"""

from __future__ import annotations

import os
import random
import signal
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import grpc

from chain.v1 import block_pb2, node_info_pb2, rpc_pb2
from chain.v1 import message_pb2 as pb
from node.sdk.authority import Authority
from node.sdk.rpc import ChainClient, reason_of
from tests.node.replicated.etcdproc import EtcdCluster
from tests.node.server.actors import RemoteActor, authority_builder
from tests.node.server.nodeproc import NodeProcess

# several nodes on one host: no fixed-port listeners beyond the ones NodeProcess binds to port 0
ENV = {"CHAIN_NODE_METRICS_ADDR": ""}


class ReplicaSet:
    def __init__(self, work_dir: Path, etcd: EtcdCluster, *extra: str, block_interval: float = 0.05) -> None:
        self.work_dir = work_dir
        self.etcd = etcd
        self.extra = extra
        self.block_interval = block_interval
        self.nodes: list[NodeProcess] = []
        self._started: list[NodeProcess] = []  # every process ever started, so stop() leaves none behind

    def args(self, index: int) -> list[str]:
        return [
            "--orderer", "etcd", "--etcd-endpoints", self.etcd.endpoints_flag, "--node-id", f"n{index}",
            "--lease-ttl", "2", "--verify-workers", "0", "--block-interval", str(self.block_interval),
            "--empty-block-interval", "1", *self.extra,
        ]  # fmt: skip

    def _launch(self, node: NodeProcess) -> NodeProcess:
        self._started.append(node)
        return node.start()

    def start(self, count: int) -> ReplicaSet:
        for i in range(count):  # the first creates the devnet; the others take its genesis from etcd
            self.nodes.append(self._launch(NodeProcess(self.work_dir / f"n{i}", *self.args(i), env=ENV)))
        return self

    def add(self, *args: str, data_dir: Path | None = None) -> NodeProcess:
        i = len(self.nodes)
        node = self._launch(NodeProcess(data_dir or self.work_dir / f"n{i}", *self.args(i), *args, env=ENV))
        self.nodes.append(node)
        return node

    def authority(self) -> Authority:
        return self.nodes[0].authority()

    def alive(self) -> list[NodeProcess]:
        return [n for n in self.nodes if n.proc is not None and n.proc.poll() is None]

    def kill(self, index: int) -> None:
        node = self.nodes[index]
        assert node.proc is not None
        node.proc.send_signal(signal.SIGKILL)
        node.proc.wait()

    def restart(self, index: int) -> NodeProcess:
        old = self.nodes[index]
        self.nodes[index] = self._launch(NodeProcess(old.data_dir, *old.args, env=old.env))
        return self.nodes[index]

    def stop(self) -> None:
        for node in self._started:
            try:
                node.stop()
            except Exception:  # never leave the others running
                if node.proc is not None:
                    node.proc.kill()


def status(node: NodeProcess) -> node_info_pb2.NodeStatus:
    with node.client(timeout=5) as c:
        return c.stub.GetNodeStatus(rpc_pb2.GetNodeStatusRequest(), timeout=5).status


def leader_index(nodes: ReplicaSet, timeout: float = 15.0) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for i, n in enumerate(nodes.nodes):
            if n in nodes.alive():
                try:
                    if status(n).role == "leader":
                        return i
                except grpc.RpcError:
                    pass
        time.sleep(0.1)
    raise TimeoutError("no leader")


def wait_height(nodes: Sequence[NodeProcess], height: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        heights = [status(n).block_height for n in nodes]
        if min(heights) >= height:
            return
        time.sleep(0.1)
    raise TimeoutError(f"nodes did not reach block {height}: {heights}")


def blocks(node: NodeProcess, upto: int, first: int = 1) -> list[block_pb2.Block]:
    with node.client() as c:
        return [c.stub.GetBlock(rpc_pb2.GetBlockRequest(block_number=n)).block for n in range(first, upto + 1)]


def assert_same_chain(nodes: Sequence[NodeProcess], upto: int) -> list[block_pb2.Block]:
    """Every node holds the same block (hash, state root) at every height up to `upto`."""
    reference = blocks(nodes[0], upto)
    for node in nodes[1:]:
        for mine, theirs in zip(reference, blocks(node, upto), strict=True):
            assert mine.hash == theirs.hash, f"block {mine.header.number} differs"
            assert mine.header.state_root == theirs.header.state_root
    return reference


def committed_counts(chain: Sequence[block_pb2.Block]) -> dict[bytes, int]:
    counts: dict[bytes, int] = {}
    for block in chain:
        for chunk in block.chunks:
            for m in chunk.messages:
                counts[bytes(m.hash)] = counts.get(bytes(m.hash), 0) + 1
    return counts


def funded_actors(client: ChainClient, authority: Authority, count: int, units: int = 1) -> list[RemoteActor]:
    """`count` accounts with a delegated key and `units` of storage (5,000 follows per unit)."""
    actors = [RemoteActor() for _ in range(count)]
    grants = authority_builder(authority)
    msgs: list[pb.Message] = []
    for a in actors:
        msgs += [a.b.signer_add(a.wallet, 0), grants.storage_grant(a.address, units)]
    for i in range(0, len(msgs), 100):
        client.commit(*msgs[i : i + 100])
    return actors


@dataclass
class Load:
    """Clients submitting follows to every node; on any error they retry on another node.

    `sent` maps each acknowledged hash to its message (accepted, or already held: DUPLICATE_MESSAGE)."""

    nodes: ReplicaSet
    actors: list[RemoteActor]
    batch: int = 10
    pause: float = 0.02
    sent: dict[bytes, pb.Message] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> Load:
        for i, actor in enumerate(self.actors):
            t = threading.Thread(target=self._run, args=(i, actor), daemon=True)
            t.start()
            self._threads.append(t)
        return self

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(60)

    def submit(self, msgs: Sequence[pb.Message], first: int = 0) -> None:
        """Submit until some node answers for every message (retrying on other nodes)."""
        target = first
        while True:
            alive = self.nodes.alive()
            node = alive[target % len(alive)]
            try:
                with ChainClient(node.grpc_target, timeout=5) as c:
                    results = c.batch(msgs)
            except grpc.RpcError as err:
                with self._lock:
                    self.errors.append(reason_of(err))
                target += 1
                time.sleep(0.1)
                continue
            with self._lock:
                for msg, r in zip(msgs, results, strict=True):
                    if r.accepted or r.reason_code == "DUPLICATE_MESSAGE":
                        self.sent[bytes(msg.hash)] = msg
                    else:
                        self.errors.append(r.reason_code)
            return

    def _run(self, index: int, actor: RemoteActor) -> None:
        rng = random.Random(index)
        while not self._stop.is_set():
            self.submit([actor.b.follow(os.urandom(20)) for _ in range(self.batch)], rng.randrange(100))
            time.sleep(self.pause)

    def settle(self, timeout: float = 120.0) -> None:
        """Resubmit whatever acknowledged message is not committed yet (a crashed leader lost it) until all are."""
        deadline = time.monotonic() + timeout
        committed: set[bytes] = set()
        scanned = 0
        while True:
            node = self.nodes.alive()[0]
            height = status(node).block_height
            if height > scanned:
                committed |= set(committed_counts(blocks(node, height, first=scanned + 1)))
                scanned = height
            missing = [m for h, m in self.sent.items() if h not in committed]
            if not missing:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"{len(missing)} acknowledged messages never committed")
            for i in range(0, len(missing), 100):
                self.submit(missing[i : i + 100])
            time.sleep(1.0)
