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
from node.sdk.rpc import reason_of
from node.server.config import parse_config
from node.server.ordering.etcd.client import EtcdClient, op_delete, op_put
from node.server.ordering.etcd.log import BlockLog, Keys
from tests.fixtures.etcdproc import EtcdCluster
from tests.fixtures.replicaset import ReplicaSet, status, wait_height
from tests.fixtures.scrape import scrape, value

KEYS = Keys(b"/chain-node/")


def forge_next(data_dir: Path) -> block_pb2.Block:
    """The node's next block, valid in every way but its state root."""
    chain = Chain.open(data_dir)
    try:
        out = chain.build(int(time.time() * 1000), [])
    finally:
        chain.close()
    block = out.block
    block.header.state_root = os.urandom(32)
    block.hash = header_hash(block.header)
    return block


def append_as_leader(etcd: EtcdCluster, block: block_pb2.Block) -> None:
    async def run() -> None:
        client = EtcdClient(etcd.endpoints)
        try:
            lease = await client.grant(60)  # hold leadership so no member appends meanwhile
            await client.txn([], [op_put(KEYS.leader, b'{"id": "test", "addr": "127.0.0.1:1"}', lease)])
            assert await BlockLog(client, KEYS).append(block, lease)
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


def test_state_root_mismatch_stops_writes(tmp_path: Path, etcd1: EtcdCluster) -> None:
    nodes = ReplicaSet(tmp_path, etcd1).start(1)
    try:
        node = nodes.nodes[0]
        wait_height([node], 1)
        assert value(scrape(node.ready["metrics_port"]), "chain_member_diverged") == 0
        assert node.stop() == 0  # a clean stop gives up leadership
        forged = forge_next(node.data_dir)
        height = forged.header.number - 1
        append_as_leader(etcd1, forged)
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
        assert value(scrape(node.ready["metrics_port"]), "chain_member_diverged") == 1
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
