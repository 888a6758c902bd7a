"""`--tree-cache-nodes`: how many of the latest blocks' tree nodes the node keeps in memory for the next
updates (docs/merkle.md, "Storage"). The flag sizes the memo of the chain the node opens, and a node that
keeps none reads every node from the store and still commits blocks whose proofs check out."""

from __future__ import annotations

from pathlib import Path

import grpc

from chain.v1 import rpc_pb2, service_pb2_grpc
from node.constants import TREE_CACHE_NODES
from node.sdk.proofs import verify_operation_proof
from node.server.bootstrap import Bootstrap
from node.server.config import parse_config
from node.storage import schema
from tests.fixtures.actors import new_account
from tests.fixtures.nodeproc import NodeProcess


def test_the_flag_sizes_the_memo_of_the_chain_the_node_opens(tmp_path: Path) -> None:
    for argv, expected in (([], TREE_CACHE_NODES), (["--tree-cache-nodes", "3"], 3)):
        data = tmp_path / str(expected)
        chain, _new_devnet = Bootstrap(parse_config(["--data-dir", str(data), *argv], {})).open_store()
        try:
            assert chain.recent_nodes.capacity == expected
        finally:
            chain.close()


def test_a_node_that_keeps_no_tree_nodes_commits_and_proves(tmp_path: Path) -> None:
    node = NodeProcess(tmp_path / "data", "--tree-cache-nodes", "0").start()
    try:
        client = node.client()
        actors = [new_account(client, node.authority()) for _ in range(3)]
        for n, actor in enumerate(actors):
            client.commit(actor.b.project_create(f"uncached-{n}", "every tree node read from the store"))
        with grpc.insecure_channel(node.grpc_target) as channel:
            stub = service_pb2_grpc.ChainServiceStub(channel)
            for actor in actors:
                got = stub.GetOperationProof(
                    rpc_pb2.GetOperationProofRequest(key=schema.account_key(actor.address)), timeout=20
                )
                assert got.proof.value  # present
                assert verify_operation_proof(got.proof, got.state_root)
    finally:
        node.stop()
