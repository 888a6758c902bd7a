"""The stale-timestamp rule (docs/state.md, "Stale timestamps"): which types it covers, and its boundary.

The removes that tombstone a quota-counted element are stale-checked like the adds (as the public
reference checks them); PROJECT_REMOVE and the merge-request types are not (their timestamps decide
nothing about quota-counted state here).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from chain.v1 import message_pb2 as pb
from node import constants as C
from node.errors import Reason
from node.sdk.keys import Secp256k1Key
from node.state.registry import REGISTRY
from tests.harness import Harness, commit_meta
from tests.node.state.helpers import created_id

AGE = C.MAX_QUOTA_MESSAGE_AGE
Make = Callable[[str, int], pb.Message]
LATER = 1000  # how far the block time moves after the add


@pytest.fixture
def h(tmp_path: Path) -> Harness:
    return Harness(tmp_path)


def _follow(h: Harness) -> Make:
    a, target = h.actor(), h.new_actor().address
    return lambda kind, ts: a.b.follow(target, remove=kind == "remove", timestamp=ts)


def _star(h: Harness) -> Make:
    a = h.actor()
    pid = created_id(h.commit(a.b.project_create("starred")))
    return lambda kind, ts: a.b.star(pid, remove=kind == "remove", timestamp=ts)


def _like(h: Harness) -> Make:
    owner, liker = h.actor(), h.actor()
    pid = created_id(h.commit(owner.b.project_create("p")))
    c = commit_meta(1)
    h.commit(owner.b.commit_bundle(pid, [c]))
    return lambda kind, ts: liker.b.like(pid, c.hash, remove=kind == "remove", timestamp=ts)


def _collaborator(h: Harness) -> Make:
    owner = h.actor()
    pid = created_id(h.commit(owner.b.project_create("p")))
    x = h.new_actor().address

    def make(kind: str, ts: int) -> pb.Message:
        if kind == "remove":
            return owner.b.collaborator_remove(pid, x, timestamp=ts)
        return owner.b.collaborator_add(pid, x, pb.PERMISSION_WRITE, timestamp=ts)

    return make


def _verification(h: Harness) -> Make:
    a, ext = h.actor(), Secp256k1Key.generate()

    def make(kind: str, ts: int) -> pb.Message:
        if kind == "remove":
            return a.b.verification_remove(ext.address, timestamp=ts)
        return a.b.verification_add(ext, timestamp=ts)

    return make


FAMILIES: dict[str, Callable[[Harness], Make]] = {
    "link_follow": _follow,
    "link_star": _star,
    "reaction_like": _like,
    "collaborator": _collaborator,
    "verification": _verification,
}


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_a_remove_older_than_the_window_is_stale(h: Harness, family: str) -> None:
    make = FAMILIES[family](h)
    added = h.now
    h.commit(make("add", added))
    h.now = added + LATER  # the remove below is newer than the add: only its age can refuse it
    now = h.now
    too_old = now - AGE - 1
    err = h.reject(make("remove", too_old), Reason.STALE_TIMESTAMP)
    assert err.values == {"timestamp": too_old, "now": now}
    h.commit(make("remove", h.now - AGE))  # exactly at the bound: accepted, and it removes


def test_the_quota_class_is_the_reference_storage_sensitive_set() -> None:
    checked = {kind.name for kind in REGISTRY.kinds.values() if kind.max_age is not None}
    assert checked == {
        "PROJECT_CREATE",
        "FORK",
        "COLLABORATOR_ADD",
        "COLLABORATOR_REMOVE",
        "STORAGE_GRANT",
        "VERIFICATION_ADD",
        "VERIFICATION_REMOVE",
        "LINK_ADD",
        "LINK_REMOVE",
        "REACTION_ADD",
        "REACTION_REMOVE",
    }


def test_project_remove_and_merge_requests_may_be_old(h: Harness) -> None:
    a, b = h.actor(), h.actor()
    target = created_id(h.commit(a.b.project_create("target")))
    gone = created_id(h.commit(a.b.project_create("gone")))
    source = created_id(h.commit(b.b.fork(target, "fork")))
    start = h.now
    h.now = start + LATER
    old = start + 1  # newer than what it acts on, LATER - 1 s behind the block time
    opened = h.commit(b.b.merge_request_add(target, source, b"refs/heads/x", b"refs/heads/main", timestamp=old))
    h.commit(b.b.merge_request_remove(target, created_id(opened), timestamp=old))
    h.commit(a.b.project_remove(gone, timestamp=old))
    assert h.project(target).open_merge_request_count == 0
