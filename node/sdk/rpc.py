"""A small synchronous gRPC client for ChainService (tests, chainctl, benchmarks).

with ChainClient("localhost:50051") as c:
    h = c.submit(msg)
    committed = c.wait_committed(h)
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from types import TracebackType

import grpc

from chain.v1 import (
    admin_service_pb2_grpc,
    block_pb2,
    keychain_service_pb2_grpc,
    rpc_pb2,
    service_pb2_grpc,
)
from chain.v1 import message_pb2 as pb
from node.errors import REASON_CODE, CliCode, trailer


def reason_of(err: grpc.RpcError) -> str:
    """The stable reason code a node put in the trailing metadata of a failed call."""
    if not isinstance(err, grpc.Call):
        return CliCode.UNKNOWN
    return trailer(err.trailing_metadata(), REASON_CODE) or err.code().name


class Dropped(Exception):
    """A submitted message was accepted but dropped before commit."""


class ChainClient:
    def __init__(self, target: str, *, timeout: float = 30.0, admin_target: str = "", admin_token: str = "") -> None:
        options = [("grpc.max_receive_message_length", 64 * 1024 * 1024)]
        self.channel = grpc.insecure_channel(target, options=options)
        self.stub = service_pb2_grpc.ChainServiceStub(self.channel)
        self.keychain = keychain_service_pb2_grpc.KeychainServiceStub(self.channel)
        self.timeout = timeout
        self._admin_channel = grpc.insecure_channel(admin_target) if admin_target else None
        self.admin = (
            admin_service_pb2_grpc.AdminServiceStub(self._admin_channel) if self._admin_channel is not None else None
        )
        self.admin_metadata = (("authorization", f"Bearer {admin_token}"),) if admin_token else ()

    def __enter__(self) -> ChainClient:
        return self

    def __exit__(self, *exc: tuple[type[BaseException] | None, BaseException | None, TracebackType | None]) -> None:
        self.close()

    def close(self) -> None:
        self.channel.close()
        if self._admin_channel is not None:
            self._admin_channel.close()

    def submit(self, msg: pb.Message) -> bytes:
        resp = self.stub.SubmitMessage(rpc_pb2.SubmitMessageRequest(message=msg), timeout=self.timeout)
        return bytes(resp.hash)

    def batch(self, msgs: Sequence[pb.Message]) -> list[rpc_pb2.SubmitResult]:
        req = rpc_pb2.BatchSubmitMessagesRequest(messages=msgs)
        return list(self.stub.BatchSubmitMessages(req, timeout=self.timeout).results)

    def wait_committed(self, message_hash: bytes, timeout: float = 30.0) -> block_pb2.CommittedMessage:
        deadline = time.monotonic() + timeout
        while True:
            try:
                resp = self.stub.GetMessage(rpc_pb2.GetMessageRequest(hash=message_hash), timeout=self.timeout)
                return resp.message
            except grpc.RpcError as err:
                if not isinstance(err, grpc.Call) or err.code() != grpc.StatusCode.NOT_FOUND:
                    raise
                if "dropped" in (err.details() or ""):
                    raise Dropped(err.details()) from None
            if time.monotonic() > deadline:
                raise TimeoutError(f"message {message_hash.hex()} not committed within {timeout} s")
            time.sleep(0.05)

    def commit(self, *msgs: pb.Message, timeout: float = 30.0) -> list[block_pb2.CommittedMessage]:
        """Submit messages (in order, one batch) and wait until all are committed."""
        results = self.batch(msgs)
        bad = [r for r in results if not r.accepted]
        if bad:
            raise ValueError(f"rejected: {[(r.index, r.reason_code, r.detail) for r in bad]}")
        return [self.wait_committed(r.hash, timeout) for r in results]
