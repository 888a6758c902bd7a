"""A small async client for etcd's v3 JSON gateway (HTTP/JSON on the client URL).

Only what the replicated orderer needs: range, put, delete, txn, leases and
compaction. Keys and values are bytes (base64 on the wire, as the gateway
wants). Every call goes to the endpoint that answered last; on a connection
error, a timeout or a server-side error it tries the next one, and raises
`EtcdUnavailable` when none answers (no quorum, all members down).
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp

from node.errors import ChainError

Json = dict[str, Any]


class EtcdUnavailable(ChainError):
    """No etcd endpoint answered (members down, no quorum, or every request timed out)."""


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def _unb64(text: str | None) -> bytes:
    return base64.b64decode(text) if text else b""


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
class KeyValue:
    key: bytes
    value: bytes
    create_revision: int
    mod_revision: int
    lease: int

    @classmethod
    def from_json(cls, doc: Json) -> KeyValue:
        return cls(
            key=_unb64(doc.get("key")),
            value=_unb64(doc.get("value")),
            create_revision=int(doc.get("create_revision", 0)),
            mod_revision=int(doc.get("mod_revision", 0)),
            lease=int(doc.get("lease", 0)),
        )


@dataclass(frozen=True)
class TxnResult:
    succeeded: bool
    revision: int
    responses: list[Json]

    def ranges(self, index: int) -> list[KeyValue]:
        """The key-values of the `index`-th response, which must be a range."""
        doc = self.responses[index].get("response_range", {})
        return [KeyValue.from_json(kv) for kv in doc.get("kvs", [])]


# ---- compare and operation builders (the shapes of etcd's Compare and RequestOp in JSON) ----
def cmp_value(key: bytes, value: bytes) -> Json:
    return {"key": _b64(key), "target": "VALUE", "result": "EQUAL", "value": _b64(value)}


def cmp_absent(key: bytes) -> Json:
    return {"key": _b64(key), "target": "CREATE", "result": "EQUAL", "create_revision": "0"}


def cmp_lease(key: bytes, lease: int) -> Json:
    return {"key": _b64(key), "target": "LEASE", "result": "EQUAL", "lease": str(lease)}


def op_put(key: bytes, value: bytes, lease: int = 0) -> Json:
    body: Json = {"key": _b64(key), "value": _b64(value)}
    if lease:
        body["lease"] = str(lease)
    return {"request_put": body}


def op_range(key: bytes, range_end: bytes = b"", limit: int = 0) -> Json:
    body: Json = {"key": _b64(key)}
    if range_end:
        body["range_end"] = _b64(range_end)
    if limit:
        body["limit"] = str(limit)
    return {"request_range": body}


def op_delete(key: bytes, range_end: bytes = b"") -> Json:
    body: Json = {"key": _b64(key)}
    if range_end:
        body["range_end"] = _b64(range_end)
    return {"request_delete_range": body}


class EtcdClient:
    def __init__(self, endpoints: Sequence[str], *, timeout: float = 2.0) -> None:
        if not endpoints:
            raise ValueError("at least one etcd endpoint is needed")
        self.endpoints = [e.rstrip("/") for e in endpoints]
        self.timeout = timeout
        self._current = 0
        self._session: aiohttp.ClientSession | None = None

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.timeout))
        return self._session

    async def call(self, path: str, body: Json) -> Json:
        """POST to the gateway, failing over across endpoints."""
        errors: list[str] = []
        for attempt in range(len(self.endpoints)):
            index = (self._current + attempt) % len(self.endpoints)
            url = self.endpoints[index] + path
            try:
                async with self._http().post(url, json=body) as resp:
                    doc: Json = await resp.json(content_type=None)
                    if resp.status >= 500 or "error" in doc:
                        errors.append(f"{url}: {resp.status} {doc.get('error') or doc.get('message')}")
                        continue
                    if resp.status >= 400:
                        raise ChainError(f"etcd rejected {path}: {resp.status} {doc}")
            except (TimeoutError, aiohttp.ClientError, ValueError) as exc:
                errors.append(f"{url}: {type(exc).__name__} {exc}")
                continue
            self._current = index
            return doc.get("result", doc) if path == "/v3/lease/keepalive" else doc
        raise EtcdUnavailable("; ".join(errors))

    # ---- kv ----
    async def range(self, key: bytes, range_end: bytes = b"", *, limit: int = 0) -> list[KeyValue]:
        doc = await self.call("/v3/kv/range", op_range(key, range_end, limit)["request_range"])
        return [KeyValue.from_json(kv) for kv in doc.get("kvs", [])]

    async def get(self, key: bytes) -> KeyValue | None:
        kvs = await self.range(key)
        return kvs[0] if kvs else None

    async def put(self, key: bytes, value: bytes, *, lease: int = 0) -> int:
        doc = await self.call("/v3/kv/put", op_put(key, value, lease)["request_put"])
        return int(doc["header"]["revision"])

    async def txn(self, compare: list[Json], success: list[Json], failure: Sequence[Json] = ()) -> TxnResult:
        doc = await self.call("/v3/kv/txn", {"compare": compare, "success": success, "failure": list(failure)})
        return TxnResult(bool(doc.get("succeeded", False)), int(doc["header"]["revision"]), doc.get("responses", []))

    async def compact(self, revision: int) -> None:
        await self.call("/v3/kv/compaction", {"revision": str(revision)})

    # ---- leases ----
    async def grant(self, ttl: int) -> int:
        doc = await self.call("/v3/lease/grant", {"TTL": str(ttl)})
        return int(doc["ID"])

    async def keepalive(self, lease: int) -> int:
        """Refresh a lease; returns its remaining TTL (0: the lease has expired)."""
        doc = await self.call("/v3/lease/keepalive", {"ID": str(lease)})
        return int(doc.get("TTL", 0))

    async def revoke(self, lease: int) -> None:
        await self.call("/v3/lease/revoke", {"ID": str(lease)})
