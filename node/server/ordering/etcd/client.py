"""A small async client for etcd's v3 gRPC API (the subset in rpc.proto beside this file).

Only what the replicated orderer needs: range, put, delete, txn, leases,
compaction and a watch on one key; and what the operator's member management needs: member list, add and
remove, and one member's status (`member_status`, asked of that member alone). Every call goes to the
endpoint that answered last; when that member cannot answer (UNAVAILABLE, a timeout, no leader, an internal error) it
tries the next one, and raises `EtcdUnavailable` when none answers (no quorum,
all members down). A request etcd refuses for what it is (a compacted revision,
an invalid argument) raises `ChainError` without trying the others.

Endpoints are etcd client URLs (`http://host:2379`, `https://host:2379`): etcd
serves gRPC and its JSON gateway on the same port. An `https://` endpoint is dialed
over TLS trusting `tls.ca_file` (the system's roots without one) and, with
`tls.cert_file`/`tls.key_file`, presenting that client certificate (etcd's
`--client-cert-auth`). With `tls` given, a bare `host:port` is TLS too and an
`http://` endpoint is a configuration error (the certificates would go unused).
A failed handshake (etcd's certificate not signed by the CA, etcd refusing the
client certificate) is reported as such, naming the endpoint (`EtcdTLSError`
when it is every endpoint's failure), and the endpoint's channel is opened
again from the files at the next call, so renewed certificates are picked up.
It speaks etcd's gRPC API, not its JSON gateway: under a replicated load the
gateway's JSON decoding of every request (base64 blocks included) is over half
the CPU of the member the nodes talk to.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar
from urllib.parse import urlsplit

import grpc

from node.errors import ChainError, ConfigError
from node.server.ordering.etcd import rpc_pb2, rpc_pb2_grpc
from node.tls import ClientTLS, TLSFileError, tls_failure

Compare = rpc_pb2.Compare
RequestOp = rpc_pb2.RequestOp
KeyValue = rpc_pb2.KeyValue  # key, value, create_revision, mod_revision, version, lease
Member = rpc_pb2.Member  # ID, name (empty until the member first started), peerURLs, clientURLs
T = TypeVar("T")

# etcd's answers when the member asked cannot serve now: another member may.
_TRY_NEXT = frozenset(
    {
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.INTERNAL,
        grpc.StatusCode.UNKNOWN,
        grpc.StatusCode.CANCELLED,
        grpc.StatusCode.RESOURCE_EXHAUSTED,
    }
)
# A log read returns up to fetch_limit blocks of up to a MiB each; etcd itself sends without a limit.
_OPTIONS = (("grpc.max_receive_message_length", -1), ("grpc.max_send_message_length", 64 * 1024 * 1024))


class EtcdUnavailable(ChainError):
    """No etcd endpoint answered (members down, no quorum, or every request timed out)."""


class EtcdFull(EtcdUnavailable):
    """etcd refuses writes: its database outgrew `--quota-backend-bytes` and it raised the NOSPACE alarm. The
    alarm is the cluster's, so no other endpoint is tried; reads and deletes still work, and writes only once
    an operator has freed space and disarmed the alarm (docs/operations.md, EtcdDatabaseNearQuota). A
    subclass of EtcdUnavailable: every loop that retries on that retries on this too."""


class EtcdTLSError(EtcdUnavailable, ConfigError):
    """Every endpoint failed its TLS handshake: etcd's certificate does not verify against the CA given, or
    etcd refused the client certificate (none, or one its `--trusted-ca-file` did not sign). An
    EtcdUnavailable, so loops that retry go on retrying (a renewed certificate is read at the next attempt);
    a ConfigError, so at start the process ends with this one line."""


# what etcd's quota answers (RESOURCE_EXHAUSTED) carry: ErrGRPCNoSpace, "etcdserver: mvcc: database space exceeded"
_NO_SPACE = "database space exceeded"


def prefix_end(prefix: bytes) -> bytes:
    """The smallest key greater than every key starting with `prefix` (etcd's range_end for a prefix)."""
    end = bytearray(prefix)
    while end:
        if end[-1] < 0xFF:
            end[-1] += 1
            return bytes(end)
        end.pop()
    return b"\0"


@dataclass(frozen=True)
class TxnResult:
    succeeded: bool
    revision: int
    responses: list[rpc_pb2.ResponseOp]

    def ranges(self, index: int) -> list[KeyValue]:
        """The key-values of the `index`-th response, which must be a range."""
        return list(self.responses[index].response_range.kvs)


# ---- compare and operation builders ----
def cmp_value(key: bytes, value: bytes) -> Compare:
    return Compare(key=key, target=Compare.VALUE, result=Compare.EQUAL, value=value)


def cmp_absent(key: bytes) -> Compare:
    return Compare(key=key, target=Compare.CREATE, result=Compare.EQUAL, create_revision=0)


def cmp_lease(key: bytes, lease: int) -> Compare:
    return Compare(key=key, target=Compare.LEASE, result=Compare.EQUAL, lease=lease)


def op_put(key: bytes, value: bytes, lease: int = 0) -> RequestOp:
    return RequestOp(request_put=rpc_pb2.PutRequest(key=key, value=value, lease=lease))


def op_range(key: bytes, range_end: bytes = b"", limit: int = 0, *, keys_only: bool = False) -> RequestOp:
    request = rpc_pb2.RangeRequest(key=key, range_end=range_end, limit=limit, keys_only=keys_only)
    return RequestOp(request_range=request)


def op_delete(key: bytes, range_end: bytes = b"") -> RequestOp:
    return RequestOp(request_delete_range=rpc_pb2.DeleteRangeRequest(key=key, range_end=range_end))


@dataclass
class _Endpoint:
    channel: grpc.aio.Channel
    kv: rpc_pb2_grpc.KVAsyncStub
    lease: rpc_pb2_grpc.LeaseAsyncStub
    watch: rpc_pb2_grpc.WatchAsyncStub
    cluster: rpc_pb2_grpc.ClusterAsyncStub
    maintenance: rpc_pb2_grpc.MaintenanceAsyncStub


def _target(url: str, *, secure: bool = False) -> tuple[str, bool]:
    """(host:port, TLS) of an etcd client URL; a bare host:port is TLS when `secure`."""
    parts = urlsplit(url if "://" in url else f"{'https' if secure else 'http'}://{url}")
    if not parts.hostname or parts.scheme not in ("http", "https"):
        raise ValueError(f"not an etcd client URL: {url!r}")
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return f"{host}:{parts.port or 2379}", parts.scheme == "https"


def _handshake_failed(details: str) -> bool:
    # gRPC reports etcd's refusal of the client certificate (TLS 1.3: an alert after the handshake) as a
    # transport-security error on the first read, "Unwrap failed (TSI_DATA_CORRUPTED)", which names no TLS
    return tls_failure(details) or "TSI_" in details


class EtcdClient:
    def __init__(self, endpoints: Sequence[str], *, tls: ClientTLS | None = None, timeout: float = 2.0) -> None:
        """`tls`: the CA, client certificate and key for `https://` endpoints (files read now: a
        TLSFileError names the flag and the file); None trusts the system's roots with no client certificate."""
        if not endpoints:
            raise ValueError("at least one etcd endpoint is needed")
        self.endpoints = [e.rstrip("/") for e in endpoints]
        self._targets = [_target(e, secure=tls is not None) for e in self.endpoints]
        if tls is not None:
            plain = [e for e, (_, secure) in zip(self.endpoints, self._targets, strict=True) if not secure]
            if plain:
                files = (tls.ca_file, tls.cert_file, tls.key_file)
                given = ", ".join(flag for flag, path in zip(tls.flags, files, strict=True) if path)
                raise ConfigError(f"{given} given but etcd endpoint {plain[0]} is plaintext: write it https://")
            tls.check()
        self.tls = tls
        self.timeout = timeout
        self._current = 0
        self._open: dict[int, _Endpoint] = {}

    async def close(self) -> None:
        open_, self._open = self._open, {}
        for endpoint in open_.values():
            await endpoint.channel.close(None)

    def _endpoint(self, index: int) -> _Endpoint:
        if index not in self._open:
            target, secure = self._targets[index]
            if secure:
                tls = self.tls or ClientTLS()
                credentials = tls.credentials()  # the files as they are now (renewed ones after a failed handshake)
                channel = grpc.aio.secure_channel(target, credentials, options=[*_OPTIONS, *tls.options()])
            else:
                channel = grpc.aio.insecure_channel(target, options=_OPTIONS)
            kv: rpc_pb2_grpc.KVAsyncStub = rpc_pb2_grpc.KVStub(channel)
            lease: rpc_pb2_grpc.LeaseAsyncStub = rpc_pb2_grpc.LeaseStub(channel)
            watch: rpc_pb2_grpc.WatchAsyncStub = rpc_pb2_grpc.WatchStub(channel)
            cluster: rpc_pb2_grpc.ClusterAsyncStub = rpc_pb2_grpc.ClusterStub(channel)
            maintenance: rpc_pb2_grpc.MaintenanceAsyncStub = rpc_pb2_grpc.MaintenanceStub(channel)
            self._open[index] = _Endpoint(channel, kv, lease, watch, cluster, maintenance)
        return self._open[index]

    def _tls_refused(self, index: int, details: str) -> str | None:
        """The one-line account of a failed TLS handshake with endpoint `index`, None when it is not one."""
        if not self._targets[index][1] or not _handshake_failed(details):
            return None
        tls = self.tls or ClientTLS()
        if "TSI_DATA_CORRUPTED" in details and tls.cert_file is None:  # our side went through: etcd refused us
            why = f"etcd asks for a client certificate and none was given ({tls.flags[1]}, {tls.flags[2]})"
        elif "TSI_DATA_CORRUPTED" in details:
            why = f"etcd refused the client certificate {tls.cert_file} (not signed by a CA etcd trusts)"
        else:
            why = f"trusting {tls.describe()}"
        return f"TLS handshake with etcd at {self.endpoints[index]} failed, {why}: {' '.join(details.split())}"

    async def _reopen(self, index: int, failed: _Endpoint) -> None:
        """Drop the channel of a failed handshake: the next call opens one from the files as they are then."""
        if self._open.get(index) is failed:
            del self._open[index]
            await failed.channel.close(None)

    async def call(self, what: str, send: Callable[[_Endpoint], Awaitable[T]]) -> T:
        """`send` to the endpoint that answered last, failing over across endpoints."""
        errors: list[str] = []
        refused = 0  # endpoints whose TLS handshake failed
        for attempt in range(len(self.endpoints)):
            index = (self._current + attempt) % len(self.endpoints)
            try:
                endpoint = self._endpoint(index)
            except TLSFileError as err:  # a renewed file caught half-written: the next call reads it again
                errors.append(f"{self.endpoints[index]}: {err}")
                refused += 1
                continue
            try:
                result = await send(endpoint)
            except grpc.aio.AioRpcError as err:
                details = err.details() or ""
                if err.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and _NO_SPACE in details:
                    raise EtcdFull(f"etcd's database is full (NOSPACE alarm): {details}") from err
                if err.code() not in _TRY_NEXT:
                    raise ChainError(f"etcd rejected {what}: {err.code().name} {details}") from err
                handshake = self._tls_refused(index, details)
                if handshake is not None:
                    errors.append(handshake)
                    refused += 1
                    await self._reopen(index, endpoint)
                else:
                    errors.append(f"{self.endpoints[index]}: {err.code().name} {details}")
                continue
            self._current = index
            return result
        raise (EtcdTLSError if refused == len(self.endpoints) else EtcdUnavailable)("; ".join(errors))

    # ---- kv ----
    async def range(self, key: bytes, range_end: bytes = b"", *, limit: int = 0) -> list[KeyValue]:
        request = rpc_pb2.RangeRequest(key=key, range_end=range_end, limit=limit)
        response = await self.call("range", lambda e: e.kv.Range(request, timeout=self.timeout))
        return list(response.kvs)

    async def get(self, key: bytes) -> KeyValue | None:
        kvs = await self.range(key)
        return kvs[0] if kvs else None

    async def put(self, key: bytes, value: bytes, *, lease: int = 0) -> int:
        request = rpc_pb2.PutRequest(key=key, value=value, lease=lease)
        response = await self.call("put", lambda e: e.kv.Put(request, timeout=self.timeout))
        return int(response.header.revision)

    async def txn(
        self, compare: Sequence[Compare], success: Sequence[RequestOp], failure: Sequence[RequestOp] = ()
    ) -> TxnResult:
        request = rpc_pb2.TxnRequest(compare=compare, success=success, failure=failure)
        response = await self.call("txn", lambda e: e.kv.Txn(request, timeout=self.timeout))
        return TxnResult(response.succeeded, int(response.header.revision), list(response.responses))

    async def compact(self, revision: int) -> None:
        request = rpc_pb2.CompactionRequest(revision=revision)
        await self.call("compaction", lambda e: e.kv.Compact(request, timeout=self.timeout))

    # ---- leases ----
    async def grant(self, ttl: int) -> int:
        request = rpc_pb2.LeaseGrantRequest(TTL=ttl)
        response = await self.call("lease grant", lambda e: e.lease.LeaseGrant(request, timeout=self.timeout))
        if response.error:
            raise ChainError(f"etcd refused a lease: {response.error}")
        return int(response.ID)

    async def keepalive(self, lease: int) -> int:
        """Refresh a lease; returns its remaining TTL (0: the lease has expired)."""
        return await self.call("lease keep-alive", lambda e: self._keepalive_once(e, lease))

    async def _keepalive_once(self, endpoint: _Endpoint, lease: int) -> int:
        # One request, then the stream is half-closed: etcd answers it before it sees the end.
        call = endpoint.lease.LeaseKeepAlive(iter([rpc_pb2.LeaseKeepAliveRequest(ID=lease)]), timeout=self.timeout)
        async for response in call:
            return int(response.TTL)
        raise ChainError("etcd closed the keep-alive stream without an answer")

    async def revoke(self, lease: int) -> None:
        request = rpc_pb2.LeaseRevokeRequest(ID=lease)
        await self.call("lease revoke", lambda e: e.lease.LeaseRevoke(request, timeout=self.timeout))

    # ---- cluster membership ----
    async def member_list(self) -> list[Member]:
        """The members as the cluster's leader knows them (a linearizable list)."""
        request = rpc_pb2.MemberListRequest(linearizable=True)
        response = await self.call("member list", lambda e: e.cluster.MemberList(request, timeout=self.timeout))
        return list(response.members)

    async def member_add(self, peer_urls: Sequence[str]) -> Member:
        """Add a voting member reachable at `peer_urls`; it has no name until it starts and joins."""
        request = rpc_pb2.MemberAddRequest(peerURLs=list(peer_urls))
        response = await self.call("member add", lambda e: e.cluster.MemberAdd(request, timeout=self.timeout))
        return response.member

    async def member_remove(self, member_id: int) -> None:
        request = rpc_pb2.MemberRemoveRequest(ID=member_id)
        await self.call("member remove", lambda e: e.cluster.MemberRemove(request, timeout=self.timeout))

    async def member_status(self, index: int) -> rpc_pb2.StatusResponse:
        """The status of the member at endpoint `index` (its leader, raft index, errors), asked of it alone:
        EtcdUnavailable when it does not answer."""
        try:
            endpoint = self._endpoint(index)
            return await endpoint.maintenance.Status(rpc_pb2.StatusRequest(), timeout=self.timeout)
        except (grpc.aio.AioRpcError, TLSFileError) as err:
            detail = f"{err.code().name} {err.details()}" if isinstance(err, grpc.aio.AioRpcError) else str(err)
            raise EtcdUnavailable(f"status of {self.endpoints[index]}: {detail}") from err

    # ---- watch ----
    async def watch(self, key: bytes) -> AsyncIterator[rpc_pb2.WatchResponse]:
        """etcd's answers on a watch of `key` from now on (the first says the watch was created), on the
        endpoint that answered last, until the stream ends; EtcdUnavailable when it breaks."""
        index = self._current
        closing = asyncio.Event()

        async def requests() -> AsyncIterator[rpc_pb2.WatchRequest]:
            yield rpc_pb2.WatchRequest(create_request=rpc_pb2.WatchCreateRequest(key=key))
            await closing.wait()  # the stream stays open for etcd's answers

        try:
            endpoint = self._endpoint(index)
        except TLSFileError as err:
            raise EtcdTLSError(f"watch on {self.endpoints[index]}: {err}") from err
        call = endpoint.watch.Watch(requests())
        try:
            async for response in call:
                yield response
        except grpc.aio.AioRpcError as err:
            handshake = self._tls_refused(index, err.details() or "")
            if handshake is not None:
                await self._reopen(index, endpoint)
                raise EtcdTLSError(f"watch: {handshake}") from err
            raise EtcdUnavailable(f"watch on {self.endpoints[index]}: {err.code().name} {err.details()}") from err
        finally:
            closing.set()
            call.cancel()
