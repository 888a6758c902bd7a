"""Upstream nodes: one gRPC channel per node address, client-side round robin.

Reads are retried on the next node when one answers UNAVAILABLE; writes are
never retried (a retried submit could be accepted twice from the client's
point of view; the node deduplicates by hash, but the caller decides).
"""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

import grpc

from chain.v1 import keychain_service_pb2_grpc, service_pb2_grpc

T = TypeVar("T")


class Upstream:
    def __init__(self, address: str) -> None:
        self.address = address
        self.channel = grpc.aio.insecure_channel(
            address, options=[("grpc.max_receive_message_length", 64 * 1024 * 1024)]
        )
        self.chain = service_pb2_grpc.ChainServiceStub(self.channel)
        self.keychain = keychain_service_pb2_grpc.KeychainServiceStub(self.channel)


class NodePool:
    def __init__(self, addresses: Sequence[str], *, read_retries: int = 2, timeout: float = 10.0) -> None:
        if not addresses:
            raise ValueError("at least one node address is needed")
        self.upstreams = [Upstream(a) for a in addresses]
        self._next = itertools.cycle(range(len(self.upstreams)))
        self.read_retries = read_retries
        self.timeout = timeout

    def pick(self) -> Upstream:
        return self.upstreams[next(self._next)]

    async def read(self, call: Callable[[Upstream], Awaitable[T]]) -> T:
        """A read on the next node; on UNAVAILABLE, the next one, up to `read_retries` more times."""
        attempts = 1 + max(0, min(self.read_retries, len(self.upstreams) - 1 + self.read_retries))
        last: grpc.aio.AioRpcError | None = None
        for _ in range(attempts):
            try:
                return await call(self.pick())
            except grpc.aio.AioRpcError as err:
                if err.code() != grpc.StatusCode.UNAVAILABLE:
                    raise
                last = err
        assert last is not None
        raise last

    async def write(self, call: Callable[[Upstream], Awaitable[T]]) -> T:
        return await call(self.pick())

    async def close(self) -> None:
        for u in self.upstreams:
            await u.channel.close(grace=None)
