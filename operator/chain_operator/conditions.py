"""Status conditions the Kubernetes way: one entry per type, `lastTransitionTime` moves only when the
status does, `reason` is CamelCase, `observedGeneration` says which spec the condition is about.

Types on a ChainNetwork:
- `Ready`: every node pod runs the desired version and is serving.
- `Upgrading`: True while a rolling upgrade runs; False with reason `Completed` or `UpgradeFailed`.
- `SnapshotsReady`: False with a reason when the last scheduled snapshot or pruning failed.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from typing import Any

Condition = dict[str, Any]


def now_iso() -> str:
    return datetime.datetime.now(tz=datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def set_condition(
    conditions: Sequence[Condition],
    type_: str,
    status: bool,
    reason: str,
    message: str,
    generation: int | None = None,
    now: str | None = None,
) -> list[Condition]:
    """A new conditions list with `type_` set; others are left as they are."""
    value = "True" if status else "False"
    old = next((c for c in conditions if c.get("type") == type_), None)
    transition = old["lastTransitionTime"] if old and old.get("status") == value else (now or now_iso())
    entry: Condition = {
        "type": type_,
        "status": value,
        "reason": reason,
        "message": message,
        "lastTransitionTime": transition,
    }
    if generation is not None:
        entry["observedGeneration"] = generation
    return [c for c in conditions if c.get("type") != type_] + [entry]


def get_condition(conditions: Sequence[Condition], type_: str) -> Condition | None:
    return next((c for c in conditions if c.get("type") == type_), None)
