"""Social family: LINK_ADD/REMOVE (follow an account, star a project), REACTION_ADD/REMOVE (like a commit)."""

from __future__ import annotations

from pathlib import Path

import pytest

from chain.v1 import message_pb2 as pb
from chain.v1 import state_pb2
from node import constants as C
from node.errors import Reason
from node.storage import schema
from tests.harness import Actor, Harness, commit_meta
from tests.node.state.helpers import add_key, created_id, edit_body

ACCOUNT = schema.LinkTarget.ACCOUNT
PROJECT = schema.LinkTarget.PROJECT
LIKE = pb.REACTION_TYPE_LIKE


@pytest.fixture
def h(tmp_path: Path) -> Harness:
    return Harness(tmp_path / "chain")


def project(h: Harness, owner: Actor, name: str = "p", **kw: object) -> tuple[bytes, pb.CommitMeta]:
    pid = created_id(h.commit(owner.b.project_create(name, **kw)))  # type: ignore[arg-type]
    c = commit_meta(1)
    h.commit(owner.b.commit_bundle(pid, [c]))
    return pid, c


def link(h: Harness, owner: bytes, kind: schema.LinkTarget, target: bytes) -> state_pb2.Link | None:
    return h.state().load(state_pb2.Link, schema.link_key(owner, kind, target))


# ---------------------------------------------------------------- follow
def test_follow_and_unfollow(h: Harness) -> None:
    a = h.actor()
    target = h.new_actor().address  # an account with no state can be followed
    t = h.now
    h.commit(a.b.follow(target))
    assert link(h, a.address, ACCOUNT, target) == state_pb2.Link(
        owner_address=a.address, type=pb.LINK_TYPE_FOLLOW, target_owner_address=target, created_at=t
    )
    assert h.account(a.address).link_count == 1
    assert h.state().exists(schema.link_by_target_key(ACCOUNT, target, a.address))
    # a newer add refreshes created_at only
    h.commit(a.b.follow(target))
    record = link(h, a.address, ACCOUNT, target)
    assert record is not None and record.created_at == t + 1
    assert h.account(a.address).link_count == 1
    h.commit(a.b.follow(target, remove=True))
    key = schema.link_key(a.address, ACCOUNT, target)
    st = h.state()
    assert st.load(state_pb2.Link, key) is None
    assert st.stamp(schema.tombstone_key(key)) == t + 2
    assert not st.exists(schema.link_by_target_key(ACCOUNT, target, a.address))
    assert h.account(a.address).link_count == 0
    # following again after the tombstone clears it
    h.commit(a.b.follow(target))
    assert h.state().stamp(schema.tombstone_key(key)) is None
    assert h.account(a.address).link_count == 1


def test_follow_rejections(h: Harness) -> None:
    a = h.actor()
    target = h.new_actor().address
    err = h.reject(a.b.follow(a.address), Reason.INVALID_FIELD)
    assert err.values["field"] == "target_owner_address"
    msg = a.b.follow(target)
    for fields, bad in (
        ({"target_owner_address": b"\x01" * 19}, "target_owner_address"),
        ({"target_project_id": b"\x01" * 32}, "target_project_id"),
        ({"type": 0}, "type"),
        ({"type": 3}, "type"),
    ):
        assert h.reject(edit_body(msg, a.key, **fields), Reason.INVALID_FIELD).values["field"] == bad
    h.reject(h.actor(units=0).b.follow(target), Reason.NO_STORAGE)
    h.reject(a.b.follow(target, timestamp=h.now - C.MAX_QUOTA_MESSAGE_AGE - 1), Reason.STALE_TIMESTAMP)
    h.reject(a.b.follow(target, timestamp=h.now + C.MAX_FUTURE_DRIFT + 1), Reason.FUTURE_TIMESTAMP)
    h.reject(add_key(h, a, pb.KEY_SCOPE_AGENT).follow(target), Reason.INSUFFICIENT_SCOPE)
    t = h.now
    h.commit(a.b.follow(target))
    err = h.reject(a.b.follow(target, timestamp=t - 1), Reason.ALREADY_EXISTS)
    assert err.values == {"added_at": t, "got": t - 1}
    h.commit(a.b.follow(target, remove=True, timestamp=t + 5))
    err = h.reject(a.b.follow(target, timestamp=t + 5), Reason.TOMBSTONED)  # remove wins ties
    assert err.values == {"removed_at": t + 5, "got": t + 5}
    h.reject(a.b.follow(target, timestamp=t + 1), Reason.TOMBSTONED)


def test_unfollow_rejections(h: Harness) -> None:
    a = h.actor()
    target = h.new_actor().address
    key = schema.link_key(a.address, ACCOUNT, target)
    h.reject(a.b.follow(target, remove=True), Reason.NOT_PRESENT)
    assert h.state().stamp(schema.tombstone_key(key)) is None  # no tombstone for something never added
    t = h.now
    h.commit(a.b.follow(target))
    err = h.reject(a.b.follow(target, remove=True, timestamp=t - 1), Reason.STALE_UPDATE)
    assert err.values == {"added_at": t, "got": t - 1}
    msg = a.b.follow(target, remove=True)
    for fields, bad in (({"target_owner_address": b""}, "target_owner_address"), ({"type": 0}, "type")):
        assert h.reject(edit_body(msg, a.key, **fields), Reason.INVALID_FIELD).values["field"] == bad
    h.reject(a.b.follow(a.address, remove=True), Reason.INVALID_FIELD)
    h.commit(a.b.follow(target, remove=True, timestamp=t))  # same timestamp as the add: remove wins
    assert link(h, a.address, ACCOUNT, target) is None


def test_follow_quota(h: Harness) -> None:
    a = h.actor()
    targets = [i.to_bytes(20, "big") for i in range(1, C.UNIT_LINKS + 1)]
    h.commit(*(a.b.follow(t) for t in targets))
    assert h.account(a.address).link_count == C.UNIT_LINKS
    err = h.reject(a.b.follow(b"\xff" * 20), Reason.QUOTA_EXCEEDED)
    assert err.values == {"what": "links", "limit": C.UNIT_LINKS, "count": C.UNIT_LINKS}
    h.commit(a.b.follow(targets[0]))  # refreshing an existing link needs no quota


# ---------------------------------------------------------------- star
def test_star_and_unstar(h: Harness) -> None:
    a, b = h.actor(), h.actor()
    pid, _ = project(h, a)
    t = h.now
    h.commit(b.b.star(pid), a.b.star(pid))  # the owner may star its own project
    assert link(h, b.address, PROJECT, pid) == state_pb2.Link(
        owner_address=b.address, type=pb.LINK_TYPE_STAR, target_project_id=pid, created_at=t
    )
    assert h.project(pid).star_count == 2
    assert h.account(b.address).link_count == 1
    assert h.state().exists(schema.link_by_target_key(PROJECT, pid, b.address))
    h.commit(b.b.star(pid))  # refresh: not counted again
    assert h.project(pid).star_count == 2
    h.commit(b.b.star(pid, remove=True))
    key = schema.link_key(b.address, PROJECT, pid)
    st = h.state()
    assert st.load(state_pb2.Link, key) is None
    assert st.stamp(schema.tombstone_key(key)) == t + 2
    assert not st.exists(schema.link_by_target_key(PROJECT, pid, b.address))
    assert h.project(pid).star_count == 1
    assert h.account(b.address).link_count == 0


def test_star_project_states(h: Harness) -> None:
    a, b = h.actor(), h.actor()
    private, _ = project(h, a, "private", visibility=pb.PROJECT_VISIBILITY_PRIVATE)
    archived, _ = project(h, a, "archived")
    removed, _ = project(h, a, "removed")
    h.commit(b.b.star(removed))
    h.commit(a.b.project_archive(archived), a.b.project_remove(removed))
    h.reject(b.b.star(bytes(32)), Reason.PROJECT_NOT_FOUND)
    h.reject(b.b.star(removed, timestamp=h.now + 1), Reason.PROJECT_REMOVED)
    h.reject(b.b.star(private), Reason.PERMISSION_DENIED)
    h.commit(b.b.star(archived))  # archived projects can be starred
    assert h.project(archived).star_count == 1
    # unstarring a removed project still works and keeps its counter right
    h.commit(b.b.star(removed, remove=True))
    assert h.project(removed).star_count == 0
    msg = b.b.star(archived)
    for fields, bad in (
        ({"target_project_id": b"\x01" * 31}, "target_project_id"),
        ({"target_owner_address": a.address}, "target_owner_address"),
    ):
        assert h.reject(edit_body(msg, b.key, **fields), Reason.INVALID_FIELD).values["field"] == bad
    h.reject(b.b.star(private, remove=True), Reason.NOT_PRESENT)


# ---------------------------------------------------------------- REACTION_ADD / REMOVE
def test_like_and_unlike(h: Harness) -> None:
    a, b = h.actor(), h.actor()
    pid, c = project(h, a)
    t = h.now
    h.commit(b.b.like(pid, c.hash))
    key = schema.reaction_key(b.address, LIKE, pid, c.hash)
    assert h.state().load(state_pb2.Reaction, key) == state_pb2.Reaction(
        owner_address=b.address, type=LIKE, project_id=pid, commit_hash=c.hash, created_at=t
    )
    assert h.account(b.address).reaction_count == 1
    assert h.state().exists(schema.reaction_by_target_key(pid, c.hash, b.address, LIKE))
    h.commit(b.b.like(pid, c.hash))  # refresh
    assert h.account(b.address).reaction_count == 1
    h.commit(b.b.like(pid, c.hash, remove=True))
    st = h.state()
    assert st.load(state_pb2.Reaction, key) is None
    assert st.stamp(schema.tombstone_key(key)) == t + 2
    assert not st.exists(schema.reaction_by_target_key(pid, c.hash, b.address, LIKE))
    assert h.account(b.address).reaction_count == 0


def test_like_through_a_fork_and_on_archived_project(h: Harness) -> None:
    a, b = h.actor(), h.actor()
    pid, c = project(h, a)
    fork = created_id(h.commit(b.b.fork(pid, "fork")))
    h.commit(b.b.like(fork, c.hash))  # the fork reaches the source's commits
    h.commit(a.b.project_archive(pid))
    h.commit(b.b.like(pid, c.hash))
    assert h.account(b.address).reaction_count == 2


def test_like_rejections(h: Harness) -> None:
    a, b = h.actor(), h.actor()
    pid, c = project(h, a)
    private, pc = project(h, a, "private", visibility=pb.PROJECT_VISIBILITY_PRIVATE)
    removed, rc = project(h, a, "removed")
    h.commit(a.b.project_remove(removed))
    unknown = commit_meta(2).hash
    err = h.reject(b.b.like(pid, unknown), Reason.COMMIT_NOT_FOUND)
    assert err.values == {"hash": unknown.hex()}
    h.reject(b.b.like(bytes(32), c.hash), Reason.PROJECT_NOT_FOUND)
    h.reject(b.b.like(removed, rc.hash), Reason.PROJECT_REMOVED)
    h.reject(b.b.like(private, pc.hash), Reason.PERMISSION_DENIED)
    h.reject(h.actor(units=0).b.like(pid, c.hash), Reason.NO_STORAGE)
    h.reject(b.b.like(pid, c.hash, timestamp=h.now - C.MAX_QUOTA_MESSAGE_AGE - 1), Reason.STALE_TIMESTAMP)
    h.reject(add_key(h, b, pb.KEY_SCOPE_AGENT).like(pid, c.hash), Reason.INSUFFICIENT_SCOPE)
    msg = b.b.like(pid, c.hash)
    for fields, bad in (
        ({"type": 0}, "type"),
        ({"type": 2}, "type"),
        ({"project_id": b"\x01" * 31}, "project_id"),
        ({"commit_hash": b""}, "commit_hash"),
    ):
        assert h.reject(edit_body(msg, b.key, **fields), Reason.INVALID_FIELD).values["field"] == bad
    t = h.now
    h.commit(b.b.like(pid, c.hash))
    h.reject(b.b.like(pid, c.hash, timestamp=t - 1), Reason.ALREADY_EXISTS)
    h.commit(b.b.like(pid, c.hash, remove=True, timestamp=t + 3))
    h.reject(b.b.like(pid, c.hash, timestamp=t + 3), Reason.TOMBSTONED)
    h.reject(b.b.like(pid, c.hash, timestamp=t + 2), Reason.TOMBSTONED)


def test_unlike_rejections(h: Harness) -> None:
    a, b = h.actor(), h.actor()
    pid, c = project(h, a)
    key = schema.reaction_key(b.address, LIKE, pid, c.hash)
    h.reject(b.b.like(pid, c.hash, remove=True), Reason.NOT_PRESENT)
    assert h.state().stamp(schema.tombstone_key(key)) is None
    t = h.now
    h.commit(b.b.like(pid, c.hash))
    h.reject(b.b.like(pid, c.hash, remove=True, timestamp=t - 1), Reason.STALE_UPDATE)
    msg = b.b.like(pid, c.hash, remove=True)
    for fields, bad in (
        ({"type": 0}, "type"),
        ({"project_id": b""}, "project_id"),
        ({"commit_hash": b"\x01"}, "commit_hash"),
    ):
        assert h.reject(edit_body(msg, b.key, **fields), Reason.INVALID_FIELD).values["field"] == bad
    h.reject(add_key(h, b, pb.KEY_SCOPE_AGENT).like(pid, c.hash, remove=True), Reason.INSUFFICIENT_SCOPE)
    # unliking works even after the project is removed
    h.commit(a.b.project_remove(pid))
    h.commit(b.b.like(pid, c.hash, remove=True))
    assert h.account(b.address).reaction_count == 0
