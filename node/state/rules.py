"""Conflict rules shared by handlers: LWW registers, tombstone-backed sets, quotas.

- LWW register: a write older than the field's stamp loses (STALE_UPDATE); a
  tie goes to inclusion order (the later one wins).
- Add/remove set: an add at or before the element's tombstone loses
  (TOMBSTONED); re-adding a present element only refreshes it when newer;
  a remove older than the add loses; a remove at the same timestamp wins; a
  remove of an already-removed element moves its tombstone later (an older
  one loses); a remove of an element never added is rejected and leaves no
  tombstone.
"""

from __future__ import annotations

from node import constants as C
from node.errors import MessageRejected, Reason
from node.state.access import StateAccess
from node.storage import schema


def lww_write(st: StateAccess, stamp_key: bytes, ts: int) -> None:
    current = st.stamp(stamp_key)
    if current is not None and ts < current:
        raise MessageRejected(Reason.STALE_UPDATE, "a newer write of this field exists", current=current, got=ts)
    st.set_stamp(stamp_key, ts)


def set_add(st: StateAccess, element_key: bytes, ts: int, present_ts: int | None) -> bool:
    """Admit an add; returns True when the element is new (counters grow)."""
    tomb_key = schema.tombstone_key(element_key)
    tomb = st.stamp(tomb_key)
    if tomb is not None and ts <= tomb:
        raise MessageRejected(Reason.TOMBSTONED, "removed at or after this add", removed_at=tomb, got=ts)
    if present_ts is not None:
        if ts <= present_ts:
            raise MessageRejected(Reason.ALREADY_EXISTS, "already present", added_at=present_ts, got=ts)
        return False
    if tomb is not None:
        st.delete(tomb_key)
    return True


def set_remove(st: StateAccess, element_key: bytes, ts: int, present_ts: int | None) -> bool:
    """Admit a remove and leave (or raise) the element's tombstone.

    Returns True when a present element was removed (counters shrink). A remove
    of an element already removed only moves its tombstone later, so removes
    commute: the tombstone ends at the latest remove whatever the order."""
    tomb_key = schema.tombstone_key(element_key)
    if present_ts is None:
        tomb = st.stamp(tomb_key)
        if tomb is None:
            raise MessageRejected(Reason.NOT_PRESENT, "nothing to remove")
        if ts <= tomb:
            raise MessageRejected(Reason.STALE_UPDATE, "already removed at or after this", removed_at=tomb, got=ts)
        st.set_stamp(tomb_key, ts)
        return False
    if ts < present_ts:
        raise MessageRejected(Reason.STALE_UPDATE, "added after this remove", added_at=present_ts, got=ts)
    st.delete(element_key)
    st.set_stamp(tomb_key, ts)
    return True


def check_quota(st: StateAccess, owner: bytes, now: int, what: str, count: int, per_unit: int) -> None:
    units = st.active_units(owner, now)
    if units == 0:
        raise MessageRejected(Reason.NO_STORAGE, "the account has no active storage grant", what=what)
    limit = units * per_unit
    if count >= limit:
        raise MessageRejected(
            Reason.QUOTA_EXCEEDED, f"{what}: {count} of {limit} used", what=what, limit=limit, count=count
        )


def check_limit(what: str, count: int, limit: int) -> None:
    if count >= limit:
        raise MessageRejected(Reason.LIMIT_EXCEEDED, f"{what}: at most {limit}", what=what, limit=limit)


__all__ = ("C", "check_limit", "check_quota", "lww_write", "set_add", "set_remove")
