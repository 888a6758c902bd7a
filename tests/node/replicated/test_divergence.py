"""A block in the log whose state root differs from what this node computes halts the node loudly."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from chain.v1 import block_pb2
from node.block import header_hash
from node.chain import Chain
from node.sdk.authority import Authority
from node.sdk.rpc import reason_of
from node.server.config import parse_config
from node.server.ordering.etcd.client import EtcdClient, op_delete, op_put
from node.server.ordering.etcd.log import BlockLog, Keys
from node.state.writeset import encode_write_set
from node.storage import schema
from tests.fixtures.actors import authority_builder
from tests.fixtures.etcdproc import EtcdCluster
from tests.fixtures.replicaset import ReplicaSet, status, wait_height
from tests.fixtures.scrape import scrape, value

KEYS = Keys(b"/chain-node/")


def forge_next(data_dir: Path) -> tuple[block_pb2.Block, bytes]:
    """The node's next block, valid in every way but its state root (and its true write set)."""
    chain = Chain.open(data_dir)
    try:
        out = chain.build(int(time.time() * 1000), [])
    finally:
        chain.close()
    block = out.block
    block.header.state_root = os.urandom(32)
    block.hash = header_hash(block.header)
    return block, encode_write_set(out.writes)


def forge_write_set(data_dir: Path, authority: Authority) -> tuple[block_pb2.Block, bytes]:
    """The node's next block (a storage grant), valid in every way, with its write set changed: one value of
    public state differs from what the block's execution writes."""
    chain = Chain.open(data_dir)
    try:
        grant = authority_builder(authority).storage_grant(os.urandom(20), 1)
        out = chain.build(int(time.time() * 1000), [grant])
    finally:
        chain.close()
    assert len(out.applied) == 1
    writes = dict(out.writes)
    key = min(k for k, v in writes.items() if schema.in_tree(k) and v is not None)
    writes[key] = (writes[key] or b"") + b"!"
    return out.block, encode_write_set(writes)


def append_as_leader(etcd: EtcdCluster, block: block_pb2.Block, write_set: bytes | None = None) -> None:
    async def run() -> None:
        client = EtcdClient(etcd.endpoints)
        try:
            lease = await client.grant(60)  # hold leadership so no member appends meanwhile
            await client.txn([], [op_put(KEYS.leader, b'{"id": "test", "addr": "127.0.0.1:1"}', lease)])
            assert await BlockLog(client, KEYS).append(block, lease, write_set)
        finally:
            await client.close()

    asyncio.run(run())


def delete_leader_key(etcd: EtcdCluster) -> None:
    async def run() -> None:
        client = EtcdClient(etcd.endpoints)
        try:
            await client.txn([], [op_delete(KEYS.leader)])
        finally:
            await client.close()

    asyncio.run(run())


@pytest.mark.parametrize("forged", ["state root", "write set"])
def test_state_root_mismatch_stops_writes(tmp_path: Path, etcd1: EtcdCluster, forged: str) -> None:
    """A block whose header's state root is not what its execution makes, or a true block whose write set was
    changed (the member applies write sets: `--verify-blocks root`, the default): the root check refuses it."""
    nodes = ReplicaSet(tmp_path, etcd1).start(1)
    try:
        node = nodes.nodes[0]
        wait_height([node], 1)
        assert value(scrape(node.ready["metrics_port"]), "chain_member_diverged") == 0
        authority = nodes.authority()
        assert node.stop() == 0  # a clean stop gives up leadership
        block, write_set = (
            forge_next(node.data_dir) if forged == "state root" else forge_write_set(node.data_dir, authority)
        )
        height = block.header.number - 1
        append_as_leader(etcd1, block, write_set)
        node = nodes.restart(0)
        deadline = time.monotonic() + 15
        while not any("STATE DIVERGED" in line for line in node.stderr_lines):
            assert time.monotonic() < deadline, "the node did not report the divergence"
            time.sleep(0.1)
        assert status(node).block_height == height  # the forged block was not committed; reads still work
        with grpc.insecure_channel(node.grpc_target) as channel:
            health = health_pb2_grpc.HealthStub(channel)
            deadline = time.monotonic() + 5
            while health.Check(health_pb2.HealthCheckRequest()).status != health_pb2.HealthCheckResponse.NOT_SERVING:
                assert time.monotonic() < deadline
                time.sleep(0.1)
        with node.client() as c:
            with pytest.raises(grpc.RpcError) as info:
                c.submit(nodes.authority().bootstrap_message())
            assert reason_of(info.value) == "STATE_DIVERGED"
            assert isinstance(info.value, grpc.Call) and info.value.code() == grpc.StatusCode.UNAVAILABLE
        # What the ChainMemberDiverged alert reads.
        metrics = scrape(node.ready["metrics_port"])
        assert value(metrics, "chain_member_diverged") == 1
        assert value(metrics, "chain_member_state", chain_member_state="HALTED") == 1
        # The forger's key gone, the halted member does not take leadership: it would stop every member's writes.
        delete_leader_key(etcd1)
        for _ in range(20):
            assert status(node).role == "follower"
            time.sleep(0.1)
        assert any("not campaigning for leadership: it stopped taking writes" in line for line in node.stderr_lines)
    finally:
        nodes.stop()


def test_flags_and_environment() -> None:
    env = {"CHAIN_NODE_ORDERER": "etcd", "CHAIN_NODE_ETCD_ENDPOINTS": "http://127.0.0.1:1, http://127.0.0.1:2"}
    cfg = parse_config(["--max-lag-blocks", "4"], env)
    assert cfg.orderer == "etcd"
    assert cfg.etcd_endpoints == ("http://127.0.0.1:1", "http://127.0.0.1:2")
    assert cfg.max_lag_blocks == 4
    assert parse_config(["--follow", "127.0.0.1:5"], {}).follow == "127.0.0.1:5"
    for argv, environ in (
        (["--orderer", "etcd"], {}),
        ([], {"CHAIN_NODE_ORDERER": "raft"}),
        (["--follow", "x:1"], env),
    ):
        with pytest.raises(SystemExit):
            parse_config(argv, environ)
