"""The gateway's nodes: one gRPC channel per node address, client-side round robin (`NodePool`).

Two kinds of upstream: the nodes' public ports (`--node-addr`: writes, streams, single reads, the gRPC-web
bridge) and their internal listeners (`--node-internal-addr`: the reads by method path, batched,
gateway/upstream/batching.py). Without internal addresses those reads go to the public ports as plain calls. A
`grpcs://` address is TLS, checked against `--node-ca-file`; the internal listener takes only a client
certificate of the cluster's CA (`--node-tls-cert`), and with one a bare internal address is TLS too.

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
from dataclasses import dataclass, field, replace
from typing import TypeVar

import grpc
from google.protobuf.message import Message

from chain.v1 import keychain_service_pb2_grpc, service_pb2_grpc
from gateway.config import GatewayConfig
from gateway.upstream.batching import Answer, Metadata, Read, ReadBatcher
from node.tls import ClientTLS, aio_channel, parse_target

T = TypeVar("T")
M = TypeVar("M", bound=Message)

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
# Reads carried by one ReadBatch call at most (gateway/upstream/batching.py) on an internal listener; 0 sends each read
# as its own call.
READ_BATCH = 64


@dataclass(frozen=True)
class NodeTLS:
    """How the gateway checks its nodes and presents itself to them: `public` trusts --node-ca-file (a
    `grpcs://` --node-addr, an `https://` --node-web-url); `internal` adds the gateway's client certificate
    (--node-tls-cert/--node-tls-key) for the nodes' internal listeners, which require one."""

    public: ClientTLS = field(default_factory=ClientTLS)
    internal: ClientTLS = field(default_factory=ClientTLS)

    @classmethod
    def of(cls, config: GatewayConfig) -> NodeTLS:
        flags = ("--node-ca-file", "--node-tls-cert", "--node-tls-key")
        public = ClientTLS(ca_file=config.node_ca_file, flags=flags)
        internal = ClientTLS(config.node_ca_file, config.node_tls_cert, config.node_tls_key, flags=flags)
        return cls(public, internal)

    def check(self) -> None:
        """Read every file once: one line naming the flag and the file now, not a handshake failure later."""
        self.internal.check()


class Upstream:
    """One node address (parse_target's syntax: `grpcs://` is TLS) and its channel, stubs and batcher."""

    def __init__(
        self, target: str, read_batch: int = READ_BATCH, tls: ClientTLS | None = None, *, secure: bool = False
    ) -> None:
        parsed = parse_target(target, secure=secure)
        self.target = target  # as configured (what the logs name)
        self.address = parsed.address  # what gRPC dials: host:port, or a dns:/// name
        self.secure = parsed.secure
        self.tls = tls or ClientTLS()
        options = DNS_CHANNEL_OPTIONS if self.address.startswith(DNS_SCHEME) else CHANNEL_OPTIONS
        self.channel = aio_channel(target, self.tls, options, secure=secure)
        self.chain = service_pb2_grpc.ChainServiceStub(self.channel)
        self.keychain = keychain_service_pb2_grpc.KeychainServiceStub(self.channel)
        # reads coalesced per loop turn (gateway/upstream/batching.py); 0: each read a plain call of its own
        self.batcher = ReadBatcher(self.channel, read_batch, stream=read_batch > 0)


def split_host_port(hostport: str) -> tuple[str, str]:
    """`host:port` or `[v6]:port` -> (host, port)."""
    host, sep, port = hostport.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError(f"node address {hostport!r} is not host:port")
    return host.strip("[]"), port


@dataclass(frozen=True)
class Dial:
    """How to reach one node: its address, TLS or not, and the TLS settings."""

    address: str
    secure: bool
    tls: ClientTLS


async def resolve(upstream: Upstream) -> list[Dial]:
    """The nodes behind one `--node-addr` entry: itself, or each address a `dns:///` name has (over TLS,
    each checked against the name's certificate, not against the address)."""
    if not upstream.address.startswith(DNS_SCHEME):
        return [Dial(upstream.address, upstream.secure, upstream.tls)]
    host, port = split_host_port(upstream.address[len(DNS_SCHEME) :])
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, int(port), type=socket.SOCK_STREAM)
    except OSError:
        return []  # nothing resolves: no node is known, hence not ready
    ips = dict.fromkeys(str(info[4][0]) for info in infos)
    tls = replace(upstream.tls, server_name=upstream.tls.server_name or host)
    return [Dial(f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}", upstream.secure, tls) for ip in ips]


class Probes:
    """One channel per node address seen, kept across checks; those no longer resolved are closed."""

    def __init__(self) -> None:
        self._by_address: dict[str, Upstream] = {}

    async def targets(self, entries: Sequence[Upstream]) -> list[Upstream]:
        dials: dict[str, Dial] = {}
        for entry in entries:
            for dial in await resolve(entry):
                dials.setdefault(dial.address, dial)
        for gone in set(self._by_address) - set(dials):
            await self._by_address.pop(gone).channel.close(grace=None)
        for address, dial in dials.items():
            if address not in self._by_address:
                self._by_address[address] = Upstream(address, 0, dial.tls, secure=dial.secure)
        return [self._by_address[a] for a in dials]

    async def close(self) -> None:
        for u in self._by_address.values():
            await u.channel.close(grace=None)
        self._by_address.clear()


class NodePool:
    """The gateway's nodes: `upstreams` (--node-addr, public) carry writes, streams and single reads;
    `readers` carry the reads by method path (`fetch`): the nodes' internal listeners (--node-internal-addr),
    batched, or without them the public upstreams, each read a plain call."""

    def __init__(
        self,
        addresses: Sequence[str],
        *,
        internal: Sequence[str] = (),
        tls: NodeTLS | None = None,
        read_retries: int = 2,
        timeout: float = 10.0,
        read_batch: int = READ_BATCH,
    ) -> None:
        if not addresses:
            raise ValueError("at least one node address is needed")
        tls = tls or NodeTLS()
        self.upstreams = [Upstream(a, 0, tls.public) for a in addresses]
        # the internal listener serves TLS only with a client certificate: a bare address is TLS when one is set
        mutual = tls.internal.cert_file is not None
        self.readers = [Upstream(a, read_batch, tls.internal, secure=mutual) for a in internal] or self.upstreams
        self._next = itertools.cycle(range(len(self.upstreams)))
        self._next_reader = itertools.cycle(range(len(self.readers)))
        self.read_retries = read_retries
        self.timeout = timeout
        self._first_contact: asyncio.Task[None] | None = None
        self.probes = Probes()  # per-node channels for readiness (gateway/readiness.py)

    def pick(self) -> Upstream:
        return self.upstreams[next(self._next)]

    async def read(self, call: Callable[[Upstream, float], Awaitable[T]]) -> T:
        """A read through a stub of the next public node (`call(upstream, timeout)`), retried as `_retried` says."""
        timeout = self.timeout
        return await self._retried(self.upstreams, next(self._next), lambda u: call(u, timeout))

    async def fetch(self, read: Read[M], request: Message) -> M:
        """A read by method path on the next reader (batched on an internal listener), retried as `_retried` says."""
        raw = await self.fetch_bytes(read.path, request.SerializeToString())
        return read.response.FromString(raw)

    async def fetch_bytes(self, method: str, request: bytes) -> bytes:
        """`fetch` with the request and the answer as the bytes on the wire (what the REST body memo keys on)."""
        return (await self.fetch_answer(method, request))[0]

    async def fetch_answer(self, method: str, request: bytes, metadata: Metadata = ()) -> Answer:
        """`fetch_bytes` with the height the node read the answer at (`chain-height`); `metadata` (the
        consistency asked for) goes with a direct call (gateway/upstream/batching.py)."""
        timeout = self.timeout
        return await self._retried(
            self.readers, next(self._next_reader), lambda u: u.batcher.answer(method, request, timeout, metadata)
        )

    async def _retried(self, upstreams: Sequence[Upstream], first: int, call: Callable[[Upstream], Awaitable[T]]) -> T:
        """`call` on upstreams[first]; on UNAVAILABLE, on the node after the one that refused it, up to
        `read_retries` more times. (Not the pool's next pick: under concurrent reads the other reads move
        the turn on between two tries, and a retry could land on the node that just refused it again.)"""
        count = len(upstreams)
        last: grpc.aio.AioRpcError | None = None
        for attempt in range(1 + max(0, self.read_retries)):
            try:
                return await call(upstreams[(first + attempt) % count])
            except grpc.aio.AioRpcError as err:
                if err.code() != grpc.StatusCode.UNAVAILABLE:
                    raise
                last = err
        assert last is not None
        raise last

    async def write(self, call: Callable[[Upstream, float], Awaitable[T]]) -> T:
        """A write through a stub of the next public node (`call(upstream, timeout)`), never retried."""
        return await call(self.pick(), self.timeout)

    async def wait_until_up(self) -> None:
        """Return once some node has accepted a connection since this pool was made (see the module doc)."""
        if self._first_contact is None:
            self._first_contact = asyncio.get_running_loop().create_task(self._contact(), name="node-first-contact")
        await asyncio.shield(self._first_contact)  # one caller cancelled does not cancel the others' wait

    async def _contact(self) -> None:
        waits = {asyncio.ensure_future(u.channel.channel_ready()): u.target for u in self.upstreams}
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
        for u in {id(u): u for u in (*self.upstreams, *self.readers)}.values():
            await u.channel.close(grace=None)
        await self.probes.close()
