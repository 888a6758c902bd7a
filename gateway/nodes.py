"""Upstream nodes: one gRPC channel per node address, client-side round robin.

Round robin at two levels: the pool turns over its `--node-addr` entries, and a `dns:///` entry's channel uses gRPC's
`round_robin` policy, so an entry `dns:///name:port` naming a headless Service spreads calls over every node
address the name resolves to (re-resolved by gRPC as nodes come and go).

Reads are retried on the next node when one answers UNAVAILABLE; writes are
never retried (a retried submit could be accepted twice from the client's
point of view; the node deduplicates by hash, but the caller decides).

A gateway may start before its node (`make run` starts both at once): the event feeds first call
`wait_until_up()`, which waits quietly, with one info line, until some node accepts a connection. After that
first contact it returns at once, so a node that goes away later is an error the caller logs as usual.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import socket
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

import grpc

from chain.v1 import keychain_service_pb2_grpc, service_pb2_grpc
from gateway.batching import ReadBatcher

T = TypeVar("T")

log = logging.getLogger(__name__)

# gRPC's reconnect backoff grows to 120 s by default, and a channel in backoff fails calls at once: a gateway
# started before its node would answer UNAVAILABLE for up to two minutes after the node is up. One second.
# `round_robin`: a `dns:///` name that resolves to several node addresses (a headless Service) is spread over
# all of them by the channel itself, instead of gRPC's default pick_first pinning every call to one node.
# Only for `dns:///` names: on a single `host:port` round_robin gains nothing, and its subchannel, once the
# node restarts, was not picked up again by the SSE feed (tests/gateway/test_events_redis.py caught it).
CHANNEL_OPTIONS = (
    ("grpc.max_receive_message_length", 64 * 1024 * 1024),
    ("grpc.max_reconnect_backoff_ms", 1000),
)
DNS_CHANNEL_OPTIONS = (*CHANNEL_OPTIONS, ("grpc.lb_policy_name", "round_robin"))
# The gRPC target scheme for names resolved by DNS (every A/AAAA record is one node).
DNS_SCHEME = "dns:///"
# How long the first contact may take before the gateway says it is waiting (a node that is up answers at once).
QUIET_WAIT = 1.0
# Reads carried by one ReadBatch call at most (gateway/batching.py); 0 sends each read as its own call.
READ_BATCH = 64


class Upstream:
    def __init__(self, address: str, read_batch: int = READ_BATCH) -> None:
        self.address = address
        options = DNS_CHANNEL_OPTIONS if address.startswith(DNS_SCHEME) else CHANNEL_OPTIONS
        self.channel = grpc.aio.insecure_channel(address, options=list(options))
        self.chain = service_pb2_grpc.ChainServiceStub(self.channel)
        self.keychain = keychain_service_pb2_grpc.KeychainServiceStub(self.channel)
        self.batcher = ReadBatcher(self.channel, read_batch)  # reads coalesced per loop turn (gateway/batching.py)


def split_host_port(hostport: str) -> tuple[str, str]:
    """`host:port` or `[v6]:port` -> (host, port)."""
    host, sep, port = hostport.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError(f"node address {hostport!r} is not host:port")
    return host.strip("[]"), port


async def resolve(address: str) -> list[str]:
    """The per-node addresses behind one `--node-addr` entry: itself, or each address a `dns:///` name has."""
    if not address.startswith(DNS_SCHEME):
        return [address]
    host, port = split_host_port(address[len(DNS_SCHEME) :])
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, int(port), type=socket.SOCK_STREAM)
    except OSError:
        return []  # nothing resolves: no node is known, hence not ready
    ips = dict.fromkeys(str(info[4][0]) for info in infos)
    return [f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}" for ip in ips]


class Probes:
    """One plain channel per node address seen, kept across checks; those no longer resolved are closed."""

    def __init__(self) -> None:
        self._by_address: dict[str, Upstream] = {}

    async def targets(self, entries: Sequence[str]) -> list[Upstream]:
        addresses: list[str] = []
        for entry in entries:
            addresses += [a for a in await resolve(entry) if a not in addresses]
        for gone in set(self._by_address) - set(addresses):
            await self._by_address.pop(gone).channel.close(grace=None)
        for a in addresses:
            if a not in self._by_address:
                self._by_address[a] = Upstream(a)
        return [self._by_address[a] for a in addresses]

    async def close(self) -> None:
        for u in self._by_address.values():
            await u.channel.close(grace=None)
        self._by_address.clear()


class NodePool:
    def __init__(
        self, addresses: Sequence[str], *, read_retries: int = 2, timeout: float = 10.0, read_batch: int = READ_BATCH
    ) -> None:
        if not addresses:
            raise ValueError("at least one node address is needed")
        self.upstreams = [Upstream(a, read_batch) for a in addresses]
        self._next = itertools.cycle(range(len(self.upstreams)))
        self.read_retries = read_retries
        # Tries per read: the first, then up to `read_retries` more (bounded by the pool's size plus retries).
        self._read_attempts = 1 + max(0, min(read_retries, len(self.upstreams) - 1 + read_retries))
        self.timeout = timeout
        self._first_contact: asyncio.Task[None] | None = None
        self.probes = Probes()  # per-node channels for readiness (gateway/readiness.py)

    def pick(self) -> Upstream:
        return self.upstreams[next(self._next)]

    async def read(self, call: Callable[[Upstream], Awaitable[T]]) -> T:
        """A read on the next node; on UNAVAILABLE, on the node after the one that refused it, up to
        `read_retries` more times. (Not the pool's next pick: under concurrent reads the other reads move
        the turn on between two tries, and a retry could land on the node that just refused it again.)"""
        first = next(self._next)
        count = len(self.upstreams)
        last: grpc.aio.AioRpcError | None = None
        for attempt in range(self._read_attempts):
            try:
                return await call(self.upstreams[(first + attempt) % count])
            except grpc.aio.AioRpcError as err:
                if err.code() != grpc.StatusCode.UNAVAILABLE:
                    raise
                last = err
        assert last is not None
        raise last

    async def write(self, call: Callable[[Upstream], Awaitable[T]]) -> T:
        return await call(self.pick())

    async def wait_until_up(self) -> None:
        """Return once some node has accepted a connection since this pool was made (see the module doc)."""
        if self._first_contact is None:
            self._first_contact = asyncio.get_running_loop().create_task(self._contact(), name="node-first-contact")
        await asyncio.shield(self._first_contact)  # one caller cancelled does not cancel the others' wait

    async def _contact(self) -> None:
        waits = {asyncio.ensure_future(u.channel.channel_ready()): u.address for u in self.upstreams}
        try:
            done, _ = await asyncio.wait(waits, timeout=QUIET_WAIT, return_when=asyncio.FIRST_COMPLETED)
            if done:
                return
            log.info("waiting for node at %s", ", ".join(waits.values()))
            done, _ = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            log.info("node at %s is up", ", ".join(waits[w] for w in done))
        finally:
            for w in waits:
                w.cancel()

    async def close(self) -> None:
        if self._first_contact is not None:
            self._first_contact.cancel()
        for u in self.upstreams:
            await u.channel.close(grace=None)
        await self.probes.close()
