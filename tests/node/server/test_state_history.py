"""`--state-history`: a running node keeps the trees of its last N blocks and collects every other stale tree
node, in its store writer process or its own thread; proofs answered over gRPC check out, and the store it
leaves restarts to the same root (docs/merkle.md, "Storage")."""

from __future__ import annotations

from pathlib import Path

import grpc
import lmdb
import pytest

from chain.v1 import rpc_pb2, service_pb2_grpc
from node.merkle.codec import EMPTY, INTERNAL_TAG, child_locations
from node.sdk.proofs import verify_operation_proof
from node.server.bootstrap import Bootstrap
from node.server.config import parse_config
from node.storage import chainlog, schema
from node.storage.retention import DEFAULT_HISTORY, StateHistory
from tests.fixtures.actors import new_account
from tests.fixtures.nodeproc import NodeProcess


def test_the_flag_reaches_the_chain_and_refuses_what_is_not_a_history(tmp_path: Path) -> None:
    for argv, expected in (([], StateHistory(DEFAULT_HISTORY)), (["--state-history", "all"], StateHistory(0))):
        data = tmp_path / str(expected)
        chain, _ = Bootstrap(parse_config(["--data-dir", str(data), *argv], {})).open_store()
        try:
            assert chain.history == expected
        finally:
            chain.close()
    for bad in ("0", "some"):
        with pytest.raises(SystemExit):
            parse_config(["--data-dir", str(tmp_path / "x"), "--state-history", bad], {})


def scan(txn: lmdb.Transaction, db: lmdb._Database, prefix: bytes) -> list[tuple[bytes, bytes]]:
    cursor = txn.cursor(db=db)
    found: list[tuple[bytes, bytes]] = []
    if cursor.set_range(prefix):
        for key, value in cursor:
            if not bytes(key).startswith(prefix):
                break
            found.append((bytes(key), bytes(value)))
    return found


def roots_and_nodes(data: Path) -> tuple[list[bytes], set[bytes], set[bytes]]:
    """From a stopped node's store: each block's state root, the keys in `nodes`, and the keys of the nodes
    under the last two roots (KeyError when one of those is gone)."""
    env = lmdb.open(str(data), max_dbs=8, readonly=True, lock=False)
    try:
        state = env.open_db(b"state", create=False)
        nodes = env.open_db(b"nodes", create=False)
        with env.begin() as txn:
            roots = []
            for _key, raw in scan(txn, state, schema.blocks_prefix()):
                roots.append(bytes(chainlog.block_shell(raw).header.state_root))
            stored = {key for key, _ in txn.cursor(db=nodes).iternext()}
            records = {key[1:]: value for key, value in scan(txn, state, bytes([schema.Prefix.TREE_ROOT]))}
            values = {key: value for key, value in txn.cursor(db=nodes).iternext()}
    finally:
        env.close()
    reached: set[bytes] = set()
    for root in roots[-2:]:
        stack = [(root, records[root])] if root != EMPTY else []
        while stack:
            ref, at = stack.pop()
            raw = values[at + ref]  # KeyError: a node under a retained root is gone
            reached.add(at + ref)
            if raw[:1] == INTERNAL_TAG:
                left_at, right_at = child_locations(raw)
                stack += [(c, a) for c, a in ((raw[1:33], left_at), (raw[33:65], right_at)) if c != EMPTY]
    return roots, stored, reached


@pytest.mark.parametrize("writer", ["process", "thread"])
def test_a_node_keeps_its_last_blocks_trees_and_nothing_older(tmp_path: Path, writer: str) -> None:
    data = tmp_path / "data"
    node = NodeProcess(data, "--state-history", "2", "--store-writer", writer).start()
    try:
        client = node.client()
        actors = [new_account(client, node.authority()) for _ in range(3)]
        for n in range(8):  # a block each
            for actor in actors:
                client.commit(actor.b.project_create(f"kept-{n}-{actor.address.hex()[:6]}", "history"))
        with grpc.insecure_channel(node.grpc_target) as channel:
            stub = service_pb2_grpc.ChainServiceStub(channel)
            for actor in actors:
                got = stub.GetOperationProof(
                    rpc_pb2.GetOperationProofRequest(key=schema.account_key(actor.address)), timeout=20
                )
                assert verify_operation_proof(got.proof, got.state_root)
    finally:
        node.stop()
    roots, stored, reached = roots_and_nodes(data)
    assert len(roots) > 10
    assert stored == reached  # the last two roots whole, every older stale node collected
    again = NodeProcess(data, "--state-history", "2", "--store-writer", writer).start()
    try:
        with grpc.insecure_channel(again.grpc_target) as channel:
            stub = service_pb2_grpc.ChainServiceStub(channel)
            head = stub.ListBlocks(rpc_pb2.ListBlocksRequest(page_size=1), timeout=20).blocks[0]
            assert bytes(head.header.state_root) == roots[-1]
    finally:
        again.stop()
