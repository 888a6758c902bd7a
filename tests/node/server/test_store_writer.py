"""A running chain-node's store writer process (docs/node.md, "The store writer"), killed with SIGKILL.

The node keeps answering; every message it accepted is committed once, whether the writer died before or
after storing its block; the chain on disk is whole afterwards; the writer goes when the node goes.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from chain.v1 import message_pb2 as pb
from chain.v1 import rpc_pb2
from node.chain import Chain
from node.storage import schema
from tests.fixtures.actors import RemoteActor
from tests.fixtures.nodeproc import NodeProcess
from tests.fixtures.procs import alive, children, wait_until
from tests.harness import recomputed_root


def fresh() -> pb.Message:
    actor = RemoteActor()
    msg: pb.Message = actor.b.signer_add(actor.wallet, 0)
    return msg


def writers(node: NodeProcess) -> list[int]:
    """The node's children running node.storage.writer."""
    assert node.proc is not None
    found = []
    for pid in children(node.proc.pid):
        try:
            if b"node.storage.writer" in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(pid)
        except OSError:
            continue
    return found


def writer_of(node: NodeProcess, timeout: float = 10.0) -> int:
    """The pid of the node's store writer."""
    assert wait_until(lambda: bool(writers(node)), timeout), "the node has no store writer process"
    return writers(node)[0]


def test_writer_killed_while_blocks_commit_loses_nothing_and_the_writer_goes_with_the_node(tmp_path: Path) -> None:
    node = NodeProcess(tmp_path / "data", "--web-addr", "", "--block-interval", "0.02").start()
    killed: list[int] = []
    accepted: list[bytes] = []
    try:
        client = node.client(timeout=10)
        for round_ in range(6):
            batch = [fresh() for _ in range(20)]
            for msg in batch:
                accepted.append(client.submit(msg))
            time.sleep(0.01 * round_)  # land in a different part of a block's commit each time
            pid = writer_of(node)
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
            # a block committed by the replacement before the next kill: one loss per block is replaced
            # at once, a second loss of the same block would be a storage failure (docs/node.md)
            accepted.append(bytes(client.commit(fresh())[0].message.hash))
        for message_hash in accepted:  # every accepted message is committed, none dropped
            client.wait_committed(message_hash, timeout=60)
        client.commit(fresh())  # and the node goes on with a new writer
        writer = writer_of(node)
        assert writer not in killed
        height = client.stub.GetNodeStatus(rpc_pb2.GetNodeStatusRequest()).status.block_height
        client.close()
        assert node.proc is not None
        os.kill(node.proc.pid, signal.SIGKILL)
        node.proc.wait()
        assert wait_until(lambda: not alive(writer), 10), "the store writer outlived the node"
    finally:
        node.stop()
    chain = Chain.open(tmp_path / "data")
    try:
        assert chain.height >= height
        assert recomputed_root(chain) == bytes(chain.head().header.state_root)
        with chain.read() as (view, _):
            for message_hash in accepted:
                assert view.get(schema.message_key(message_hash)) is not None
    finally:
        chain.close()


def test_store_writer_thread_commits_in_the_main_process(tmp_path: Path) -> None:
    node = NodeProcess(tmp_path / "data", "--web-addr", "", "--store-writer", "thread").start()
    try:
        client = node.client(timeout=10)
        client.commit(fresh())
        assert writers(node) == []
        client.close()
    finally:
        node.stop()
