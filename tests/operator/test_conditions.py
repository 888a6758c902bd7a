"""Kubernetes-style conditions: one per type, lastTransitionTime moves only with the status."""

from chain_operator.conditions import get_condition, set_condition


def test_transition_time_moves_only_when_the_status_changes():
    first = set_condition([], "Ready", False, "Starting", "m1", generation=1, now="2026-01-01T00:00:00Z")
    same = set_condition(first, "Ready", False, "StillStarting", "m2", generation=2, now="2026-01-01T00:05:00Z")
    cond = get_condition(same, "Ready")
    assert cond is not None
    assert cond["lastTransitionTime"] == "2026-01-01T00:00:00Z"
    assert (cond["reason"], cond["message"], cond["observedGeneration"]) == ("StillStarting", "m2", 2)
    flipped = set_condition(same, "Ready", True, "UpToDate", "ok", now="2026-01-01T00:09:00Z")
    cond = get_condition(flipped, "Ready")
    assert cond is not None and cond["status"] == "True"
    assert cond["lastTransitionTime"] == "2026-01-01T00:09:00Z"


def test_one_entry_per_type_and_others_untouched():
    conds = set_condition([], "Ready", True, "A", "a", now="t1")
    conds = set_condition(conds, "Upgrading", True, "B", "b", now="t2")
    conds = set_condition(conds, "Ready", False, "C", "c", now="t3")
    assert [c["type"] for c in conds] == ["Upgrading", "Ready"]
    upgrading = get_condition(conds, "Upgrading")
    assert upgrading is not None and upgrading["reason"] == "B"
    assert get_condition(conds, "SnapshotsReady") is None
