"""Reads against a member held behind (its store writer process stopped: it applies nothing meanwhile, its
main process answers reads), for the consistent-read tests (docs/replication.md, "Read consistency")."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import grpc
import pytest

from chain.v1 import block_pb2, rpc_pb2, service_pb2_grpc
from node.errors import CHAIN_HEIGHT, trailer
from node.sdk.rpc import reason_of
from tests.fixtures.nodeproc import NodeProcess
from tests.fixtures.procs import children_running

LINEARIZABLE = (("chain-read-consistency", "linearizable"),)


@contextmanager
def held_behind(node: NodeProcess) -> Iterator[None]:
    """The member's store writer stopped: it applies nothing until the block ends."""
    assert node.proc is not None
    writers = children_running(node.proc.pid, "node.storage.writer")
    assert writers, "the member commits through its store writer process"
    for pid in writers:
        os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        for pid in writers:
            os.kill(pid, signal.SIGCONT)


def get(
    node: NodeProcess, message: block_pb2.CommittedMessage, metadata: tuple[tuple[str, str], ...], timeout: float
) -> int:
    """GetMessage of `message` on `node`: the height the answer names."""
    with grpc.insecure_channel(node.grpc_target) as channel:
        stub = service_pb2_grpc.ChainServiceStub(channel)
        request = rpc_pb2.GetMessageRequest(hash=message.message.hash)
        answer, call = stub.GetMessage.with_call(request, timeout=timeout, metadata=metadata)
    assert answer.message.block_number == message.block_number
    return int(trailer(call.trailing_metadata(), CHAIN_HEIGHT) or -1)


class Later:
    """A read in a thread: its height, or its error."""

    def __init__(self, node: NodeProcess, message: block_pb2.CommittedMessage, metadata: tuple[tuple[str, str], ...]):
        self.height: int | None = None
        self.error: grpc.RpcError | None = None
        self._thread = threading.Thread(target=self._run, args=(node, message, metadata))
        self._thread.start()

    def _run(
        self, node: NodeProcess, message: block_pb2.CommittedMessage, metadata: tuple[tuple[str, str], ...]
    ) -> None:
        try:
            self.height = get(node, message, metadata, 60)
        except grpc.RpcError as err:
            self.error = err

    def result(self) -> int:
        self._thread.join(90)
        assert self.error is None, f"{self.error.code()} {reason_of(self.error)}: {self.error.details()}"
        assert self.height is not None
        return self.height


def refused(
    node: NodeProcess, message: block_pb2.CommittedMessage, metadata: tuple[tuple[str, str], ...]
) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as refused:
        get(node, message, metadata, 3.0)
    return refused.value
