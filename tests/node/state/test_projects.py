"""Project family: PROJECT_CREATE, PROJECT_METADATA, PROJECT_ARCHIVE, PROJECT_REMOVE, FORK,
COLLABORATOR_ADD/REMOVE, MERGE_REQUEST_ADD/REMOVE. Accepted cases with exact state, then rejections."""

from __future__ import annotations

from pathlib import Path

import pytest

from chain.v1 import message_pb2 as pb
from chain.v1 import node_info_pb2, state_pb2
from node import constants as C
from node.errors import Reason
from node.sdk.keys import Ed25519Key
from node.storage import schema
from tests.harness import Actor, Harness, commit_meta
from tests.node.state.helpers import add_key, builder, created_id, edit_body

PUBLIC = pb.PROJECT_VISIBILITY_PUBLIC
PRIVATE = pb.PROJECT_VISIBILITY_PRIVATE
READ, WRITE, ADMIN = pb.PERMISSION_READ, pb.PERMISSION_WRITE, pb.PERMISSION_ADMIN
ACTIVE = state_pb2.PROJECT_STATUS_ACTIVE
ARCHIVED = state_pb2.PROJECT_STATUS_ARCHIVED
REMOVED = state_pb2.PROJECT_STATUS_REMOVED
MAIN = b"refs/heads/main"


@pytest.fixture
def h(tmp_path: Path) -> Harness:
    return Harness(tmp_path / "chain")


def make_project(h: Harness, owner: Actor, name: str = "proj", **kw: object) -> bytes:
    return created_id(h.commit(owner.b.project_create(name, **kw)))  # type: ignore[arg-type]


def collaborator(h: Harness, owner: Actor, pid: bytes, permission: pb.Permission.ValueType, units: int = 0) -> Actor:
    c = h.actor(units=units)
    h.commit(owner.b.collaborator_add(pid, c.address, permission))
    return c


def random_id(n: int = 32) -> bytes:
    return bytes(range(n))


# ---------------------------------------------------------------- PROJECT_CREATE
def test_project_create_record_counters_and_indexes(h: Harness) -> None:
    a = h.actor()
    t, number = h.now, h.chain.height + 1
    stats_before = h.state().stats().total_projects
    out = h.commit(a.b.project_create("Hello", description="hi", visibility=PRIVATE))
    pid = created_id(out)
    assert h.project(pid) == state_pb2.Project(
        project_id=pid,
        owner_address=a.address,
        name="Hello",
        description="hi",
        visibility=PRIVATE,
        status=ACTIVE,
        created_at=t,
        created_block=number,
    )
    assert h.account(a.address).project_count == 1
    st = h.state()
    assert st.project_id_by_name(a.address, "hello") == pid  # the name index is case-insensitive
    assert st.project_id_by_name(a.address, "HELLO") == pid
    assert st.exists(schema.project_by_owner_key(a.address, pid))
    assert st.exists(schema.project_by_name_key("Hello", pid))
    assert st.exists(schema.live_project_key(pid))
    assert st.kv.get(schema.project_activity_key(pid, out.applied[0].event_id)) == pid
    assert st.load(node_info_pb2.ChainStats, schema.meta_key(schema.META_STATS)).total_projects == stats_before + 1  # type: ignore[union-attr]


def test_project_create_unspecified_visibility_is_public_and_names_are_per_owner(h: Harness) -> None:
    a, b = h.actor(), h.actor()
    msg = edit_body(a.b.project_create("x"), a.key, visibility=0)
    pid = created_id(h.commit(msg))
    assert h.project(pid).visibility == PUBLIC
    # another account may use the same name; so may a with another name in the same block
    h.commit(b.b.project_create("x"), a.b.project_create("y", description="d" * C.MAX_DESCRIPTION_LEN))
    assert h.account(a.address).project_count == 2
    assert h.account(b.address).project_count == 1


@pytest.mark.parametrize(
    ("fields", "bad"),
    [
        ({"name": ""}, "name"),
        ({"name": ".hidden"}, "name"),
        ({"name": "-dash"}, "name"),
        ({"name": "a b"}, "name"),
        ({"name": "a/b"}, "name"),
        ({"name": "é"}, "name"),
        ({"name": "x" * (C.MAX_PROJECT_NAME_LEN + 1)}, "name"),
        ({"description": "d" * (C.MAX_DESCRIPTION_LEN + 1)}, "description"),
        ({"visibility": 3}, "visibility"),
    ],
)
def test_project_create_invalid_field(h: Harness, fields: dict[str, object], bad: str) -> None:
    a = h.actor()
    err = h.reject(edit_body(a.b.project_create("ok"), a.key, **fields), Reason.INVALID_FIELD)
    assert err.values["field"] == bad


def test_project_create_longest_and_odd_valid_names(h: Harness) -> None:
    a = h.actor()
    h.commit(*(a.b.project_create(n) for n in ("x" * C.MAX_PROJECT_NAME_LEN, "_a", "a.b-c_d", "0")))
    assert h.account(a.address).project_count == 4


def test_project_create_name_taken(h: Harness) -> None:
    a = h.actor()
    make_project(h, a, "Hello")
    assert h.reject(a.b.project_create("Hello"), Reason.NAME_TAKEN).values == {"name": "Hello"}
    h.reject(a.b.project_create("hELLO"), Reason.NAME_TAKEN)
    # the second of two same-name creates in one block loses
    out = h.build(a.b.project_create("twin"), a.b.project_create("TWIN"))
    assert [d.error.reason for d in out.dropped] == [Reason.NAME_TAKEN]


def test_project_create_storage_and_quota(h: Harness) -> None:
    poor = h.actor(units=0)
    h.reject(poor.b.project_create("p"), Reason.NO_STORAGE)
    a = h.actor(units=1)
    h.commit(*(a.b.project_create(f"p{i}") for i in range(C.UNIT_PROJECTS)))
    assert h.account(a.address).project_count == C.UNIT_PROJECTS
    err = h.reject(a.b.project_create("p10"), Reason.QUOTA_EXCEEDED)
    assert err.values == {"what": "projects", "limit": 10, "count": 10}
    # removing one frees a slot
    pid = h.state().project_id_by_name(a.address, "p0")
    assert pid is not None
    h.commit(a.b.project_remove(pid))
    h.commit(a.b.project_create("p10"))


def test_project_create_authorization_and_time(h: Harness) -> None:
    a = h.actor()
    h.reject(builder(h, a.address, Ed25519Key.generate()).project_create("p"), Reason.UNKNOWN_SIGNER)
    err = h.reject(add_key(h, a, pb.KEY_SCOPE_AGENT).project_create("p"), Reason.INSUFFICIENT_SCOPE)
    assert err.values == {"required": pb.KEY_SCOPE_SIGNING, "got": pb.KEY_SCOPE_AGENT}
    h.reject(a.b.project_create("p", timestamp=h.now - C.MAX_QUOTA_MESSAGE_AGE - 1), Reason.STALE_TIMESTAMP)
    h.reject(a.b.project_create("p", timestamp=h.now + C.MAX_FUTURE_DRIFT + 1), Reason.FUTURE_TIMESTAMP)
    # both edges of the window are accepted
    h.commit(
        a.b.project_create("old", timestamp=h.now - C.MAX_QUOTA_MESSAGE_AGE),
        a.b.project_create("new", timestamp=h.now + C.MAX_FUTURE_DRIFT),
    )
    h.commit(add_key(h, a, pb.KEY_SCOPE_SIGNING).project_create("by-signing-key"))


# ---------------------------------------------------------------- PROJECT_METADATA
def test_project_metadata_every_field(h: Harness) -> None:
    a = h.actor()
    pid = make_project(h, a)
    t = h.now
    h.commit(
        a.b.project_metadata(pid, pb.PROJECT_FIELD_DESCRIPTION, "desc"),
        a.b.project_metadata(pid, pb.PROJECT_FIELD_WEBSITE, "https://p.dev"),
        a.b.project_metadata(pid, pb.PROJECT_FIELD_VISIBILITY, "private"),
        a.b.project_metadata(pid, pb.PROJECT_FIELD_DEFAULT_BRANCH, "main"),
        a.b.project_metadata(pid, pb.PROJECT_FIELD_TOPICS, "git,chain"),
    )
    p = h.project(pid)
    assert (p.description, p.website, p.visibility, p.default_branch, p.topics) == (
        "desc",
        "https://p.dev",
        PRIVATE,
        "main",
        "git,chain",
    )
    st = h.state()
    for f in range(1, 6):
        assert st.stamp(schema.lww_stamp_key(schema.LwwEntity.PROJECT, pid, f)) == t
    h.commit(a.b.project_metadata(pid, pb.PROJECT_FIELD_VISIBILITY, "public"))
    assert h.project(pid).visibility == PUBLIC


def test_project_metadata_lww(h: Harness) -> None:
    a = h.actor()
    pid = make_project(h, a)
    t = h.now
    h.commit(a.b.project_metadata(pid, pb.PROJECT_FIELD_DESCRIPTION, "newer", timestamp=t + 10))
    err = h.reject(
        a.b.project_metadata(pid, pb.PROJECT_FIELD_DESCRIPTION, "older", timestamp=t + 9), Reason.STALE_UPDATE
    )
    assert err.values == {"current": t + 10, "got": t + 9}
    h.commit(a.b.project_metadata(pid, pb.PROJECT_FIELD_DESCRIPTION, "tie", timestamp=t + 10))
    assert h.project(pid).description == "tie"
    h.commit(a.b.project_metadata(pid, pb.PROJECT_FIELD_WEBSITE, "other field", timestamp=t))


@pytest.mark.parametrize(
    ("fields", "bad"),
    [
        ({"project_id": b"\x01" * 31}, "project_id"),
        ({"field": 0}, "field"),
        ({"field": 6}, "field"),
        ({"field": pb.PROJECT_FIELD_VISIBILITY, "value": "secret"}, "value"),
        ({"field": pb.PROJECT_FIELD_VISIBILITY, "value": "PUBLIC"}, "value"),
        ({"field": pb.PROJECT_FIELD_DESCRIPTION, "value": "d" * (C.MAX_DESCRIPTION_LEN + 1)}, "value"),
        ({"field": pb.PROJECT_FIELD_DEFAULT_BRANCH, "value": ""}, "value"),
        ({"field": pb.PROJECT_FIELD_DEFAULT_BRANCH, "value": "ma\x00in"}, "value"),
        ({"field": pb.PROJECT_FIELD_DEFAULT_BRANCH, "value": "b" * (C.MAX_REF_NAME_LEN + 1)}, "value"),
        ({"field": pb.PROJECT_FIELD_WEBSITE, "value": "w" * (C.MAX_TEXT_FIELD_LEN + 1)}, "value"),
        ({"field": pb.PROJECT_FIELD_TOPICS, "value": "t" * (C.MAX_TEXT_FIELD_LEN + 1)}, "value"),
    ],
)
def test_project_metadata_invalid_field(h: Harness, fields: dict[str, object], bad: str) -> None:
    a = h.actor()
    msg = a.b.project_metadata(random_id(), pb.PROJECT_FIELD_DESCRIPTION, "ok")
    assert h.reject(edit_body(msg, a.key, **fields), Reason.INVALID_FIELD).values["field"] == bad


def test_project_metadata_permissions(h: Harness) -> None:
    a = h.actor()
    pid = make_project(h, a)
    stranger = h.actor(units=0)
    writer = collaborator(h, a, pid, WRITE)
    admin = collaborator(h, a, pid, ADMIN)
    reader = collaborator(h, a, pid, READ)
    err = h.reject(stranger.b.project_metadata(pid, pb.PROJECT_FIELD_DESCRIPTION, "x"), Reason.PERMISSION_DENIED)
    assert err.values == {"required": WRITE, "got": READ}  # public project: everyone reads
    h.reject(reader.b.project_metadata(pid, pb.PROJECT_FIELD_TOPICS, "x"), Reason.PERMISSION_DENIED)
    h.commit(writer.b.project_metadata(pid, pb.PROJECT_FIELD_DESCRIPTION, "by writer"))
    err = h.reject(writer.b.project_metadata(pid, pb.PROJECT_FIELD_VISIBILITY, "private"), Reason.PERMISSION_DENIED)
    assert err.values == {"required": ADMIN, "got": WRITE}
    h.commit(admin.b.project_metadata(pid, pb.PROJECT_FIELD_VISIBILITY, "private"))
    p = h.project(pid)
    assert (p.description, p.visibility) == ("by writer", PRIVATE)
    # private project: a stranger has no permission at all
    err = h.reject(stranger.b.project_metadata(pid, pb.PROJECT_FIELD_DESCRIPTION, "x"), Reason.PERMISSION_DENIED)
    assert err.values["got"] == pb.PERMISSION_UNSPECIFIED


def test_project_metadata_project_state(h: Harness) -> None:
    a = h.actor()
    archived, removed = make_project(h, a, "arch"), make_project(h, a, "gone")
    h.commit(a.b.project_archive(archived), a.b.project_remove(removed))
    h.reject(a.b.project_metadata(random_id(), pb.PROJECT_FIELD_DESCRIPTION, "x"), Reason.PROJECT_NOT_FOUND)
    h.reject(a.b.project_metadata(archived, pb.PROJECT_FIELD_DESCRIPTION, "x"), Reason.PROJECT_ARCHIVED)
    h.reject(a.b.project_metadata(removed, pb.PROJECT_FIELD_DESCRIPTION, "x"), Reason.PROJECT_REMOVED)


# ---------------------------------------------------------------- PROJECT_ARCHIVE
def test_project_archive_and_unarchive(h: Harness) -> None:
    a = h.actor()
    pid = make_project(h, a)
    h.commit(a.b.project_archive(pid))
    assert h.project(pid).status == ARCHIVED
    st = h.state()
    assert st.exists(schema.live_project_key(pid))  # archived projects stay listed
    assert h.account(a.address).project_count == 1
    h.reject(a.b.project_archive(pid), Reason.ALREADY_EXISTS)
    h.commit(a.b.project_archive(pid, archived=False))
    assert h.project(pid).status == ACTIVE
    h.reject(a.b.project_archive(pid, archived=False), Reason.NOT_PRESENT)


def test_project_archive_rejections(h: Harness) -> None:
    a = h.actor()
    pid, removed = make_project(h, a), make_project(h, a, "gone")
    h.commit(a.b.project_remove(removed))
    writer = collaborator(h, a, pid, WRITE)
    admin = collaborator(h, a, pid, ADMIN)
    err = h.reject(writer.b.project_archive(pid), Reason.PERMISSION_DENIED)
    assert err.values == {"required": ADMIN, "got": WRITE}
    h.reject(a.b.project_archive(random_id()), Reason.PROJECT_NOT_FOUND)
    h.reject(a.b.project_archive(removed), Reason.PROJECT_REMOVED)
    err = h.reject(edit_body(a.b.project_archive(pid), a.key, project_id=b"\x01"), Reason.INVALID_FIELD)
    assert err.values["field"] == "project_id"
    h.commit(admin.b.project_archive(pid))
    assert h.project(pid).status == ARCHIVED


# ---------------------------------------------------------------- PROJECT_REMOVE
def test_project_remove_frees_name_and_indexes(h: Harness) -> None:
    a = h.actor()
    pid = make_project(h, a, "Hello")
    before = h.project(pid)
    h.commit(a.b.project_remove(pid))
    after = h.project(pid)  # the record stays, with status REMOVED
    before.status = REMOVED
    assert after == before
    st = h.state()
    assert st.project_id_by_name(a.address, "Hello") is None
    for key in (
        schema.project_by_owner_key(a.address, pid),
        schema.project_by_name_key("Hello", pid),
        schema.live_project_key(pid),
    ):
        assert not st.exists(key)
    assert h.account(a.address).project_count == 0
    new = make_project(h, a, "hello")
    assert new != pid and h.state().project_id_by_name(a.address, "HELLO") == new


def test_project_remove_rejections(h: Harness) -> None:
    a = h.actor()
    pid = make_project(h, a)
    admin = collaborator(h, a, pid, ADMIN)
    err = h.reject(admin.b.project_remove(pid), Reason.PERMISSION_DENIED)
    assert err.values == {"required": pb.PERMISSION_OWNER, "got": ADMIN}
    h.reject(a.b.project_remove(random_id()), Reason.PROJECT_NOT_FOUND)
    assert (
        h.reject(edit_body(a.b.project_remove(pid), a.key, project_id=b""), Reason.INVALID_FIELD).values["field"]
        == "project_id"
    )
    h.commit(a.b.project_archive(pid))
    h.commit(a.b.project_remove(pid))  # an archived project can be removed
    h.reject(a.b.project_remove(pid), Reason.PROJECT_REMOVED)


# ---------------------------------------------------------------- FORK
def _source_with_refs(h: Harness, owner: Actor) -> tuple[bytes, pb.CommitMeta, pb.CommitMeta]:
    pid = make_project(h, owner, "src", description="source")
    c1 = commit_meta(1)
    c2 = commit_meta(2, c1.hash)
    h.commit(owner.b.commit_bundle(pid, [c1, c2]))
    h.commit(
        owner.b.ref_update(pid, MAIN, c2.hash, 1),
        owner.b.ref_update(pid, b"refs/heads/dev", c1.hash, 1),
        owner.b.project_metadata(pid, pb.PROJECT_FIELD_DEFAULT_BRANCH, "main"),
    )
    return pid, c1, c2


def test_fork_copies_refs_and_reads_source_commits(h: Harness) -> None:
    a, b = h.actor(), h.actor()
    src, c1, c2 = _source_with_refs(h, a)
    t, number = h.now, h.chain.height + 1
    fid = created_id(h.commit(b.b.fork(src, "mine")))
    assert h.project(fid) == state_pb2.Project(
        project_id=fid,
        owner_address=b.address,
        name="mine",
        description="source",
        visibility=PUBLIC,
        status=ACTIVE,
        default_branch="main",
        forked_from=src,
        created_at=t,
        created_block=number,
        ref_count=2,
    )
    st = h.state()
    assert st.ref(fid, MAIN) == state_pb2.Ref(
        project_id=fid, name=MAIN, hash=c2.hash, nonce=1, updated_at=t, owner_address=b.address
    )
    ref = st.ref(fid, b"refs/heads/dev")
    assert ref is not None and ref.hash == c1.hash
    assert st.project_id_by_name(b.address, "mine") == fid
    assert st.exists(schema.live_project_key(fid))
    assert h.account(b.address).project_count == 1
    assert h.project(src).ref_count == 2  # source untouched
    # the fork's refs move over the source's commits (fast-forward dev -> c2)
    h.commit(b.b.ref_update(fid, b"refs/heads/dev", c2.hash, 2, old_hash=c1.hash))
    # the owner may fork its own project under another name
    h.commit(a.b.fork(src, "src-copy"))
    # re-sending the source's history to the fork stores nothing again; only the new commit counts
    c3 = commit_meta(99, c2.hash)
    h.commit(b.b.commit_bundle(fid, [c1, c2, c3]))
    assert h.project(fid).commit_count == 1
    assert h.state().commit(fid, c1.hash) is None
    assert h.state().commit(fid, c3.hash) is not None


def test_fork_rejections(h: Harness) -> None:
    a, b = h.actor(), h.actor()
    src = make_project(h, a, "src")
    private = make_project(h, a, "priv", visibility=PRIVATE)
    gone = make_project(h, a, "gone")
    archived = make_project(h, a, "old")
    h.commit(a.b.project_remove(gone), a.b.project_archive(archived))
    h.reject(b.b.fork(random_id(), "x"), Reason.PROJECT_NOT_FOUND)
    h.reject(b.b.fork(gone, "x"), Reason.PROJECT_REMOVED)
    h.reject(b.b.fork(private, "x"), Reason.PERMISSION_DENIED)
    h.reject(a.b.fork(src, "src"), Reason.NAME_TAKEN)
    h.reject(h.actor(units=0).b.fork(src, "x"), Reason.NO_STORAGE)
    h.reject(b.b.fork(src, "x", timestamp=h.now - C.MAX_QUOTA_MESSAGE_AGE - 1), Reason.STALE_TIMESTAMP)
    h.reject(add_key(h, b, pb.KEY_SCOPE_AGENT).fork(src, "x"), Reason.INSUFFICIENT_SCOPE)
    for fields, bad in (({"source_project_id": b"\x01" * 20}, "source_project_id"), ({"name": ".."}, "name")):
        assert h.reject(edit_body(b.b.fork(src, "x"), b.key, **fields), Reason.INVALID_FIELD).values["field"] == bad
    # an archived source can be forked; a reader of a private project can fork it
    h.commit(b.b.fork(archived, "from-archived"))
    reader = collaborator(h, a, private, READ, units=1)
    h.commit(reader.b.fork(private, "priv-fork"))
    # quota: b has 1 unit = 10 projects
    h.commit(*(b.b.fork(src, f"f{i}") for i in range(C.UNIT_PROJECTS - 1)))
    h.reject(b.b.fork(src, "one-too-many"), Reason.QUOTA_EXCEEDED)


# ---------------------------------------------------------------- COLLABORATOR_ADD
def test_collaborator_add_record_and_counter(h: Harness) -> None:
    a = h.actor()
    pid = make_project(h, a)
    c = h.actor(units=0)
    t = h.now
    h.commit(a.b.collaborator_add(pid, c.address, WRITE))
    key = schema.collaborator_key(pid, c.address)
    assert h.state().collaborator(pid, c.address) == state_pb2.Collaborator(
        project_id=pid, owner_address=c.address, permission=WRITE, added_at=t, added_by=a.address
    )
    assert h.project(pid).collaborator_count == 1
    # a newer add changes the permission without counting twice
    h.commit(a.b.collaborator_add(pid, c.address, READ))
    record = h.state().collaborator(pid, c.address)
    assert record is not None and (record.permission, record.added_at) == (READ, t + 1)
    assert h.project(pid).collaborator_count == 1
    assert h.state().stamp(schema.tombstone_key(key)) is None


def test_collaborator_add_by_admin(h: Harness) -> None:
    a = h.actor()
    pid = make_project(h, a)
    admin = collaborator(h, a, pid, ADMIN)
    other_admin = collaborator(h, a, pid, ADMIN)
    c = h.actor(units=0)
    h.commit(admin.b.collaborator_add(pid, c.address, WRITE))
    record = h.state().collaborator(pid, c.address)
    assert record is not None and record.added_by == admin.address
    err = h.reject(admin.b.collaborator_add(pid, h.actor(units=0).address, ADMIN), Reason.PERMISSION_DENIED)
    assert "only the owner grants ADMIN" in err.detail
    err = h.reject(admin.b.collaborator_add(pid, other_admin.address, READ), Reason.PERMISSION_DENIED)
    assert "only the owner changes an ADMIN" in err.detail
    assert h.project(pid).collaborator_count == 3


def test_collaborator_add_rejections(h: Harness) -> None:
    a = h.actor()
    pid = make_project(h, a)
    writer = collaborator(h, a, pid, WRITE)
    reader = collaborator(h, a, pid, READ)
    stranger = h.actor(units=0)
    x = h.actor(units=0).address
    for who in (stranger, reader, writer):
        err = h.reject(who.b.collaborator_add(pid, x, READ), Reason.PERMISSION_DENIED)
        assert err.values["required"] == ADMIN
    err = h.reject(a.b.collaborator_add(pid, a.address, WRITE), Reason.INVALID_FIELD)
    assert err.values["field"] == "collaborator_address"
    msg = a.b.collaborator_add(pid, x, READ)
    for fields, bad in (
        ({"permission": 0}, "permission"),
        ({"permission": pb.PERMISSION_OWNER}, "permission"),
        ({"collaborator_address": b"\x01" * 21}, "collaborator_address"),
        ({"project_id": b"\x01" * 33}, "project_id"),
    ):
        assert h.reject(edit_body(msg, a.key, **fields), Reason.INVALID_FIELD).values["field"] == bad
    h.reject(a.b.collaborator_add(random_id(), x, READ), Reason.PROJECT_NOT_FOUND)
    # ALREADY_EXISTS: an add not newer than the present one
    t = h.now
    h.commit(a.b.collaborator_add(pid, x, READ))
    h.reject(a.b.collaborator_add(pid, x, WRITE, timestamp=t - 1), Reason.ALREADY_EXISTS)
    # TOMBSTONED: an add at or before the remove
    h.commit(a.b.collaborator_remove(pid, x, timestamp=t + 5))
    h.reject(a.b.collaborator_add(pid, x, WRITE, timestamp=t + 5), Reason.TOMBSTONED)
    h.reject(a.b.collaborator_add(pid, x, WRITE, timestamp=t + 2), Reason.TOMBSTONED)
    h.commit(a.b.collaborator_add(pid, x, WRITE, timestamp=t + 6))
    assert h.state().stamp(schema.tombstone_key(schema.collaborator_key(pid, x))) is None
    h.reject(a.b.collaborator_add(pid, x, WRITE, timestamp=h.now - C.MAX_QUOTA_MESSAGE_AGE - 1), Reason.STALE_TIMESTAMP)


def test_collaborator_add_project_state(h: Harness) -> None:
    a = h.actor()
    archived, removed = make_project(h, a, "arch"), make_project(h, a, "gone")
    h.commit(a.b.project_archive(archived), a.b.project_remove(removed))
    x = h.actor(units=0).address
    h.reject(a.b.collaborator_add(archived, x, READ), Reason.PROJECT_ARCHIVED)
    h.reject(a.b.collaborator_add(removed, x, READ), Reason.PROJECT_REMOVED)


def test_collaborator_add_quota(h: Harness) -> None:
    a = h.actor()
    pid = make_project(h, a)
    others = [h.new_actor().address for _ in range(C.UNIT_COLLABORATORS)]
    h.commit(*(a.b.collaborator_add(pid, x, READ) for x in others))
    assert h.project(pid).collaborator_count == C.UNIT_COLLABORATORS
    err = h.reject(a.b.collaborator_add(pid, h.new_actor().address, READ), Reason.QUOTA_EXCEEDED)
    assert err.values == {"what": "collaborators", "limit": 50, "count": 50}
    # updating an existing collaborator is not quota-limited
    h.commit(a.b.collaborator_add(pid, others[0], WRITE))


def test_collaborator_add_no_storage_once_the_owners_grant_expired(h: Harness) -> None:
    a = h.actor()
    pid = make_project(h, a)
    h.now += C.STORAGE_GRANT_DURATION
    h.reject(a.b.collaborator_add(pid, h.new_actor().address, READ), Reason.NO_STORAGE)


# ---------------------------------------------------------------- COLLABORATOR_REMOVE
def test_collaborator_remove_leaves_a_tombstone(h: Harness) -> None:
    a = h.actor()
    pid = make_project(h, a)
    c = collaborator(h, a, pid, WRITE)
    t = h.now
    h.commit(a.b.collaborator_remove(pid, c.address))
    key = schema.collaborator_key(pid, c.address)
    st = h.state()
    assert st.collaborator(pid, c.address) is None
    assert st.stamp(schema.tombstone_key(key)) == t
    assert h.project(pid).collaborator_count == 0
    h.reject(c.b.commit_bundle(pid, [commit_meta(1)]), Reason.PERMISSION_DENIED)


def test_collaborator_remove_self_leave_and_admin_rules(h: Harness) -> None:
    a = h.actor()
    pid = make_project(h, a)
    reader = collaborator(h, a, pid, READ)
    writer = collaborator(h, a, pid, WRITE)
    admin = collaborator(h, a, pid, ADMIN)
    admin2 = collaborator(h, a, pid, ADMIN)
    h.commit(reader.b.collaborator_remove(pid, reader.address))  # leaving needs no permission
    err = h.reject(writer.b.collaborator_remove(pid, admin.address), Reason.PERMISSION_DENIED)
    assert err.values == {"required": ADMIN, "got": WRITE}
    err = h.reject(admin.b.collaborator_remove(pid, admin2.address), Reason.PERMISSION_DENIED)
    assert "only the owner removes an ADMIN" in err.detail
    h.commit(admin.b.collaborator_remove(pid, writer.address))
    h.commit(admin2.b.collaborator_remove(pid, admin2.address))  # an admin may leave
    h.commit(a.b.collaborator_remove(pid, admin.address))
    assert h.project(pid).collaborator_count == 0


def test_collaborator_remove_rejections(h: Harness) -> None:
    a = h.actor()
    pid = make_project(h, a)
    x = h.actor(units=0).address
    key = schema.collaborator_key(pid, x)
    h.reject(a.b.collaborator_remove(pid, x), Reason.NOT_PRESENT)
    assert h.state().stamp(schema.tombstone_key(key)) is None  # no tombstone for something never added
    t = h.now
    h.commit(a.b.collaborator_add(pid, x, READ))
    err = h.reject(a.b.collaborator_remove(pid, x, timestamp=t - 1), Reason.STALE_UPDATE)
    assert err.values == {"added_at": t, "got": t - 1}
    msg = a.b.collaborator_remove(pid, x)
    for fields, bad in (
        ({"collaborator_address": b""}, "collaborator_address"),
        ({"project_id": b"\x02"}, "project_id"),
    ):
        assert h.reject(edit_body(msg, a.key, **fields), Reason.INVALID_FIELD).values["field"] == bad
    h.reject(a.b.collaborator_remove(random_id(), x), Reason.PROJECT_NOT_FOUND)
    h.commit(a.b.project_archive(pid))
    h.reject(a.b.collaborator_remove(pid, x), Reason.PROJECT_ARCHIVED)
    h.commit(a.b.project_remove(pid))
    h.reject(a.b.collaborator_remove(pid, x), Reason.PROJECT_REMOVED)
    # remove at the add's own timestamp wins (checked on a fresh project)
    pid2 = make_project(h, a, "two")
    t2 = h.now
    h.commit(a.b.collaborator_add(pid2, x, READ))
    h.commit(a.b.collaborator_remove(pid2, x, timestamp=t2))
    assert h.state().collaborator(pid2, x) is None


# ---------------------------------------------------------------- MERGE_REQUEST_ADD / REMOVE
def test_merge_request_open_and_close(h: Harness) -> None:
    a, b = h.actor(), h.actor()
    target = make_project(h, a, "target")
    source = created_id(h.commit(b.b.fork(target, "fork")))
    t = h.now
    out = h.commit(b.b.merge_request_add(target, source, b"refs/heads/feature", MAIN, title="Add feature"))
    mid = created_id(out)
    st = h.state()
    assert st.merge_request(target, mid) == state_pb2.MergeRequest(
        request_id=mid,
        target_project_id=target,
        source_project_id=source,
        source_ref=b"refs/heads/feature",
        target_ref=MAIN,
        requester_owner_address=b.address,
        title="Add feature",
        status=state_pb2.MERGE_REQUEST_STATUS_OPEN,
        created_at=t,
    )
    assert st.kv.get(schema.merge_request_by_requester_key(b.address, mid)) == target
    assert h.project(target).open_merge_request_count == 1
    assert st.kv.get(schema.project_activity_key(target, out.applied[0].event_id)) == mid
    h.commit(b.b.merge_request_remove(target, mid))  # the requester closes it
    st = h.state()
    assert st.merge_request(target, mid) is None
    assert st.kv.get(schema.merge_request_by_requester_key(b.address, mid)) is None
    assert h.project(target).open_merge_request_count == 0


def test_merge_request_merged_by_owner_or_writer(h: Harness) -> None:
    a, b = h.actor(), h.actor()
    target = make_project(h, a, "target")
    writer = collaborator(h, a, target, WRITE)
    m1 = created_id(h.commit(b.b.merge_request_add(target, target, b"refs/heads/x", MAIN)))
    m2 = created_id(h.commit(b.b.merge_request_add(target, target, b"refs/heads/y", MAIN)))
    assert h.project(target).open_merge_request_count == 2
    h.commit(a.b.merge_request_remove(target, m1, reason=pb.MERGE_REQUEST_CLOSE_REASON_MERGED))
    h.commit(writer.b.merge_request_remove(target, m2))
    assert h.project(target).open_merge_request_count == 0


def test_merge_request_add_rejections(h: Harness) -> None:
    a, b = h.actor(), h.actor()
    target = make_project(h, a, "target")
    private = make_project(h, a, "private", visibility=PRIVATE)
    archived, removed = make_project(h, a, "arch"), make_project(h, a, "gone")
    h.commit(a.b.project_archive(archived), a.b.project_remove(removed))
    h.reject(b.b.merge_request_add(random_id(), target, MAIN, MAIN), Reason.PROJECT_NOT_FOUND)
    h.reject(b.b.merge_request_add(target, random_id(), MAIN, MAIN), Reason.PROJECT_NOT_FOUND)
    h.reject(b.b.merge_request_add(archived, target, MAIN, MAIN), Reason.PROJECT_ARCHIVED)
    h.reject(b.b.merge_request_add(target, removed, MAIN, MAIN), Reason.PROJECT_REMOVED)
    h.reject(b.b.merge_request_add(removed, target, MAIN, MAIN), Reason.PROJECT_REMOVED)
    h.reject(b.b.merge_request_add(private, target, MAIN, MAIN), Reason.PERMISSION_DENIED)
    h.reject(b.b.merge_request_add(target, private, MAIN, MAIN), Reason.PERMISSION_DENIED)
    h.reject(add_key(h, b, pb.KEY_SCOPE_AGENT).merge_request_add(target, target, MAIN, MAIN), Reason.INSUFFICIENT_SCOPE)
    msg = b.b.merge_request_add(target, target, MAIN, MAIN)
    for fields, bad in (
        ({"target_project_id": b"\x01"}, "target_project_id"),
        ({"source_project_id": b""}, "source_project_id"),
        ({"source_ref": b""}, "source_ref"),
        ({"target_ref": b"a\x00b"}, "target_ref"),
        ({"target_ref": b"r" * (C.MAX_REF_NAME_LEN + 1)}, "target_ref"),
        ({"title": "t" * (C.MAX_TITLE_LEN + 1)}, "title"),
        ({"description": "d" * (C.MAX_DESCRIPTION_LEN + 1)}, "description"),
    ):
        assert h.reject(edit_body(msg, b.key, **fields), Reason.INVALID_FIELD).values["field"] == bad
    # an archived source is fine; a private one is fine for a reader
    h.commit(b.b.merge_request_add(target, archived, MAIN, MAIN))
    reader = collaborator(h, a, private, READ)
    h.commit(reader.b.merge_request_add(private, private, MAIN, MAIN))
    assert h.project(target).open_merge_request_count == 1


def test_merge_request_remove_rejections(h: Harness) -> None:
    a, b, c = h.actor(), h.actor(), h.actor()
    target = make_project(h, a, "target")
    t = h.now
    mid = created_id(h.commit(b.b.merge_request_add(target, target, b"refs/heads/f", MAIN)))
    h.reject(b.b.merge_request_remove(target, random_id()), Reason.MERGE_REQUEST_NOT_FOUND)
    h.reject(b.b.merge_request_remove(random_id(), mid), Reason.PROJECT_NOT_FOUND)
    err = h.reject(c.b.merge_request_remove(target, mid), Reason.PERMISSION_DENIED)  # a third party
    assert err.values == {"required": WRITE, "got": READ}
    # the requester may close, not merge
    h.reject(
        b.b.merge_request_remove(target, mid, reason=pb.MERGE_REQUEST_CLOSE_REASON_MERGED), Reason.PERMISSION_DENIED
    )
    err = h.reject(b.b.merge_request_remove(target, mid, timestamp=t - 1), Reason.STALE_UPDATE)
    assert err.values == {"added_at": t, "got": t - 1}
    msg = b.b.merge_request_remove(target, mid)
    for fields, bad in (
        ({"reason": 3}, "reason"),
        ({"request_id": b"\x01" * 31}, "request_id"),
        ({"target_project_id": b""}, "target_project_id"),
    ):
        assert h.reject(edit_body(msg, b.key, **fields), Reason.INVALID_FIELD).values["field"] == bad
    # closing works on an archived target; a second close finds nothing
    h.commit(a.b.project_archive(target))
    h.commit(b.b.merge_request_remove(target, mid))
    h.reject(b.b.merge_request_remove(target, mid, timestamp=h.now + 1), Reason.MERGE_REQUEST_NOT_FOUND)
    h.commit(a.b.project_remove(target))
    h.reject(b.b.merge_request_remove(target, mid, timestamp=h.now + 2), Reason.PROJECT_REMOVED)
