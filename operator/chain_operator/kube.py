"""A small Kubernetes API client on aiohttp, built from the credentials kopf logged in with.

kopf talks to the API for its own watching and patching; the handlers' other calls (StatefulSets, pods,
ChainSnapshot objects) go through this client with the same `kopf.ConnectionInfo`, so no second
Kubernetes client library is needed.
"""

from __future__ import annotations

import json
from typing import Any

import aiohttp
import kopf

from chain_operator.errors import KubeError, KubeNotFound

Obj = dict[str, Any]

GROUP = "chain.dev"
VERSION = "v1"
NETWORKS = "chainnetworks"
SNAPSHOTS = "chainsnapshots"
NETWORK_LABEL = f"{GROUP}/network"


def statefulset_path(namespace: str, name: str = "") -> str:
    return f"/apis/apps/v1/namespaces/{namespace}/statefulsets" + (f"/{name}" if name else "")


def pod_path(namespace: str, name: str = "") -> str:
    return f"/api/v1/namespaces/{namespace}/pods" + (f"/{name}" if name else "")


def configmap_path(namespace: str, name: str = "") -> str:
    return f"/api/v1/namespaces/{namespace}/configmaps" + (f"/{name}" if name else "")


def custom_path(plural: str, namespace: str, name: str = "", subresource: str = "") -> str:
    path = f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/{plural}" + (f"/{name}" if name else "")
    return path + (f"/{subresource}" if subresource else "")


class KubeApi:
    def __init__(self, info: kopf.ConnectionInfo, timeout: float = 30.0) -> None:
        self.server = info.server.rstrip("/")
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=info.as_ssl_context()),
            headers={**info.as_http_headers(), "User-Agent": "chain-operator"},
            timeout=aiohttp.ClientTimeout(total=timeout),
        )

    async def close(self) -> None:
        await self._session.close()

    async def _call(self, method: str, path: str, body: Obj | None = None, content_type: str = "") -> Obj:
        headers = {"Content-Type": content_type or "application/json"} if body is not None else {}
        data = json.dumps(body) if body is not None else None
        try:
            async with self._session.request(method, self.server + path, data=data, headers=headers) as resp:
                text = await resp.text()
                if resp.status == 404:
                    raise KubeNotFound(404, f"{method} {path}")
                if resp.status >= 400:
                    raise KubeError(resp.status, f"{method} {path}: {text[:500]}")
                doc = json.loads(text) if text else {}
        except aiohttp.ClientError as exc:
            raise KubeError(503, f"{method} {path}: {exc}") from exc
        if not isinstance(doc, dict):
            raise KubeError(502, f"{method} {path}: not a JSON object")
        return doc

    async def get(self, path: str) -> Obj:
        return await self._call("GET", path)

    async def list(self, path: str, labels: dict[str, str] | None = None) -> list[Obj]:
        query = ""
        if labels:
            query = "?labelSelector=" + ",".join(f"{k}={v}" for k, v in sorted(labels.items()))
        items = (await self._call("GET", path + query)).get("items", [])
        # Filter again here: selectors are cheap to re-check, and the answer must not depend on the server.
        return [
            item
            for item in items
            if all(item.get("metadata", {}).get("labels", {}).get(k) == v for k, v in (labels or {}).items())
        ]

    async def create(self, path: str, body: Obj) -> Obj:
        return await self._call("POST", path, body)

    async def merge_patch(self, path: str, body: Obj) -> Obj:
        return await self._call("PATCH", path, body, "application/merge-patch+json")

    async def delete(self, path: str) -> None:
        await self._call("DELETE", path)
