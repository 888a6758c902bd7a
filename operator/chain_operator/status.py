"""Writing a ChainNetwork's status so that no handler undoes another's write.

The body kopf hands a handler can be stale: kopf patches the progress annotations and the status subresource
in two calls, and the watch event of the first (old status) may be taken as consistent (a real API server
after `consistency_timeout` under load; kmock keeps no resourceVersion, so any event matches). Two handlers of one
object (the upgrade handler, the snapshot timer) also run as separate tasks. A status computed from a stale
body and written back whole (`status.upgrade`, the `conditions` list) regressed the rollout: a hold written
from a status read before `begin` landed said `phase: ''`, and a snapshot tick dropped the `Upgrading`
condition. So every status-writing handler, for one object at a time:

- holds that object's lock (`StatusStore.lock`: the handlers of one object in this process run one by one),
- re-reads the object from the API (`read`) and decides from that body, not from kopf's,
- writes with a JSON merge patch of the status subresource carrying only the fields it owns plus the
  conditions it sets merged into the conditions it just read, guarded by the resourceVersion it read; on a
  409 (someone else wrote meanwhile) it re-reads and merges its conditions again (`write`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from chain_operator.conditions import Condition, set_condition
from chain_operator.errors import KubeError
from chain_operator.kube import NETWORKS, KubeApi, Obj, custom_path
from chain_operator.upgrade import ConditionUpdate

CONFLICT_RETRIES = 5


class StatusStore:
    """One asyncio.Lock per ChainNetwork (namespace, name), created on first use."""

    def __init__(self) -> None:
        self._locks: dict[tuple[str, str], asyncio.Lock] = {}

    def lock(self, namespace: str, name: str) -> asyncio.Lock:
        return self._locks.setdefault((namespace, name), asyncio.Lock())


def network_path(namespace: str, name: str) -> str:
    return custom_path(NETWORKS, namespace, name)


def status_path(namespace: str, name: str) -> str:
    return custom_path(NETWORKS, namespace, name, subresource="status")


async def read(kube: KubeApi, namespace: str, name: str) -> Obj:
    """The ChainNetwork as the API has it now."""
    return await kube.get(network_path(namespace, name))


def merged_conditions(
    status: Mapping[str, Any], updates: Sequence[ConditionUpdate], generation: int | None
) -> list[Condition]:
    conditions: list[Condition] = list(status.get("conditions") or [])
    for u in updates:
        conditions = set_condition(conditions, u.type, u.status, u.reason, u.message, generation)
    return conditions


def status_patch(body: Obj, fields: Mapping[str, Any], updates: Sequence[ConditionUpdate]) -> Obj:
    """The merge patch: the owned fields, the conditions merged into `body`'s, its resourceVersion as guard."""
    meta = body.get("metadata", {})
    gen = meta.get("generation")
    status: dict[str, Any] = dict(fields)
    if updates:
        status["conditions"] = merged_conditions(body.get("status") or {}, updates, gen)
    status["observedGeneration"] = gen
    patch: Obj = {"status": status}
    if meta.get("resourceVersion"):
        patch["metadata"] = {"resourceVersion": meta["resourceVersion"]}
    return patch


async def write(kube: KubeApi, body: Obj, fields: Mapping[str, Any], updates: Sequence[ConditionUpdate]) -> Obj:
    """Merge `fields` and `updates` into the status of the object `body` was read as; returns the new body."""
    meta = body.get("metadata", {})
    namespace, name = str(meta.get("namespace", "")), str(meta.get("name", ""))
    for _ in range(CONFLICT_RETRIES):
        try:
            return await kube.merge_patch(status_path(namespace, name), status_patch(body, fields, updates))
        except KubeError as exc:
            if exc.status != 409:
                raise
        body = await read(kube, namespace, name)
    return await kube.merge_patch(status_path(namespace, name), status_patch(body, fields, updates))
