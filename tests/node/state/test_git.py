"""Git family: REF_UPDATE, REF_DELETE, COMMIT_BUNDLE. Accepted cases with exact state, then rejections."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from chain.v1 import message_pb2 as pb
from chain.v1 import state_pb2
from node import constants as C
from node.errors import Reason
from node.sdk.keys import Ed25519Key
from node.storage import schema
from tests.harness import START, Actor, Harness, commit_meta
from tests.node.state.helpers import add_key, builder, created_id, edit_body

MAIN = b"refs/heads/main"
DEV = b"refs/heads/dev"
READ, WRITE = pb.PERMISSION_READ, pb.PERMISSION_WRITE


@pytest.fixture
def h(tmp_path: Path) -> Harness:
    return Harness(tmp_path / "chain")


class Repo:
    """A project with commits c1 <- c2 and c1 <- c3 (c3 is a sibling of c2)."""

    def __init__(self, h: Harness, owner: Actor, name: str = "repo") -> None:
        self.owner = owner
        self.pid = created_id(h.commit(owner.b.project_create(name)))
        self.c1 = commit_meta(1)
        self.c2 = commit_meta(2, self.c1.hash)
        self.c3 = commit_meta(3, self.c1.hash)
        h.commit(owner.b.commit_bundle(self.pid, [self.c1, self.c2, self.c3]))


def ref_log(h: Harness, pid: bytes, name: bytes, event_id: int) -> state_pb2.RefLogEntry | None:
    return h.state().load(state_pb2.RefLogEntry, schema.ref_log_key(pid, name, event_id))


def collaborator(h: Harness, r: Repo, permission: pb.Permission.ValueType) -> Actor:
    c = h.actor(units=0)
    h.commit(r.owner.b.collaborator_add(r.pid, c.address, permission))
    return c


# ---------------------------------------------------------------- REF_UPDATE
def test_ref_update_create_fast_forward_and_force(h: Harness) -> None:
    a = h.actor()
    r = Repo(h, a)
    t, number = h.now, h.chain.height + 1
    out = h.commit(a.b.ref_update(r.pid, MAIN, r.c1.hash, 1))
    msg = out.applied[0]
    assert h.state().ref(r.pid, MAIN) == state_pb2.Ref(
        project_id=r.pid, name=MAIN, hash=r.c1.hash, nonce=1, updated_at=t, owner_address=a.address
    )
    assert h.project(r.pid).ref_count == 1
    assert ref_log(h, r.pid, MAIN, msg.event_id) == state_pb2.RefLogEntry(
        project_id=r.pid,
        ref_name=MAIN,
        new_hash=r.c1.hash,
        nonce=1,
        owner_address=a.address,
        timestamp=t,
        message_hash=msg.message.hash,
        block_number=number,
    )
    # fast-forward c1 -> c2 with and without old_hash
    h.commit(a.b.ref_update(r.pid, MAIN, r.c2.hash, 2, old_hash=r.c1.hash))
    ref = h.state().ref(r.pid, MAIN)
    assert ref is not None and (ref.hash, ref.nonce) == (r.c2.hash, 2)
    # c2 -> c3 is not a fast-forward ...
    err = h.reject(a.b.ref_update(r.pid, MAIN, r.c3.hash, 3), Reason.NOT_FAST_FORWARD)
    assert err.values == {"current": r.c2.hash.hex()}
    # ... unless forced
    out = h.commit(a.b.ref_update(r.pid, MAIN, r.c3.hash, 3, force=True, old_hash=r.c2.hash))
    entry = ref_log(h, r.pid, MAIN, out.applied[0].event_id)
    assert entry is not None and (entry.old_hash, entry.new_hash, entry.force, entry.nonce) == (
        r.c2.hash,
        r.c3.hash,
        True,
        3,
    )
    # setting the same hash again is allowed (nonce still advances); backwards c3 -> c1 is not a fast-forward
    h.commit(a.b.ref_update(r.pid, MAIN, r.c3.hash, 4))
    h.reject(a.b.ref_update(r.pid, MAIN, r.c1.hash, 5), Reason.NOT_FAST_FORWARD)
    assert h.project(r.pid).ref_count == 1


def test_ref_update_many_refs_in_one_block_and_by_collaborators(h: Harness) -> None:
    a = h.actor()
    r = Repo(h, a)
    writer = collaborator(h, r, WRITE)
    h.commit(a.b.ref_update(r.pid, MAIN, r.c1.hash, 1), writer.b.ref_update(r.pid, DEV, r.c2.hash, 1))
    dev = h.state().ref(r.pid, DEV)
    assert dev is not None and dev.owner_address == writer.address
    assert h.project(r.pid).ref_count == 2
    # two updates of the same ref in one block chain their nonces
    h.commit(a.b.ref_update(r.pid, MAIN, r.c2.hash, 2), a.b.ref_update(r.pid, MAIN, r.c3.hash, 3, force=True))
    main = h.state().ref(r.pid, MAIN)
    assert main is not None and (main.hash, main.nonce) == (r.c3.hash, 3)


def test_ref_update_cas_rejections(h: Harness) -> None:
    a = h.actor()
    r = Repo(h, a)
    err = h.reject(a.b.ref_update(r.pid, MAIN, r.c1.hash, 2), Reason.REF_NONCE_MISMATCH)
    assert err.values == {"expected": 1, "got": 2}
    err = h.reject(a.b.ref_update(r.pid, MAIN, r.c1.hash, 1, old_hash=r.c2.hash), Reason.REF_HASH_MISMATCH)
    assert err.values == {"expected": "", "got": r.c2.hash.hex()}
    h.commit(a.b.ref_update(r.pid, MAIN, r.c1.hash, 1))
    h.reject(a.b.ref_update(r.pid, MAIN, r.c2.hash, 1), Reason.REF_NONCE_MISMATCH)  # stale nonce
    h.reject(a.b.ref_update(r.pid, MAIN, r.c2.hash, 3), Reason.REF_NONCE_MISMATCH)  # skipped nonce
    err = h.reject(a.b.ref_update(r.pid, MAIN, r.c2.hash, 2, old_hash=r.c3.hash), Reason.REF_HASH_MISMATCH)
    assert err.values == {"expected": r.c1.hash.hex(), "got": r.c3.hash.hex()}
    unknown = commit_meta(99).hash
    err = h.reject(a.b.ref_update(r.pid, MAIN, unknown, 2), Reason.COMMIT_NOT_FOUND)
    assert err.values == {"hash": unknown.hex()}
    h.reject(a.b.ref_update(r.pid, DEV, unknown, 1), Reason.COMMIT_NOT_FOUND)
    # a commit of another project is not a commit of this one
    other = Repo(h, a, "other")
    c9 = commit_meta(9)
    h.commit(a.b.commit_bundle(other.pid, [c9]))
    h.reject(a.b.ref_update(r.pid, DEV, c9.hash, 1), Reason.COMMIT_NOT_FOUND)


@pytest.mark.parametrize(
    ("fields", "bad"),
    [
        ({"project_id": b"\x01" * 31}, "project_id"),
        ({"ref_name": b""}, "ref_name"),
        ({"ref_name": b"r" * (C.MAX_REF_NAME_LEN + 1)}, "ref_name"),
        ({"ref_name": b"refs/\x00"}, "ref_name"),
        ({"new_hash": b""}, "new_hash"),
        ({"new_hash": b"\x01" * 33}, "new_hash"),
        ({"old_hash": b"\x01" * 31}, "old_hash"),
        ({"nonce": 0}, "nonce"),
    ],
)
def test_ref_update_invalid_field(h: Harness, fields: dict[str, object], bad: str) -> None:
    a = h.actor()
    msg = a.b.ref_update(bytes(32), MAIN, bytes(32), 1)
    assert h.reject(edit_body(msg, a.key, **fields), Reason.INVALID_FIELD).values["field"] == bad


def test_ref_update_longest_ref_name_accepted(h: Harness) -> None:
    a = h.actor()
    r = Repo(h, a)
    name = b"r" * C.MAX_REF_NAME_LEN
    h.commit(a.b.ref_update(r.pid, name, r.c1.hash, 1))
    assert h.state().ref(r.pid, name) is not None


def test_ref_update_permissions_and_agent_keys(h: Harness) -> None:
    a = h.actor()
    r = Repo(h, a)
    other = Repo(h, a, "other")
    stranger = h.actor()
    reader = collaborator(h, r, READ)
    err = h.reject(stranger.b.ref_update(r.pid, MAIN, r.c1.hash, 1), Reason.PERMISSION_DENIED)
    assert err.values == {"required": WRITE, "got": READ}
    h.reject(reader.b.ref_update(r.pid, MAIN, r.c1.hash, 1), Reason.PERMISSION_DENIED)
    h.reject(builder(h, a.address, Ed25519Key.generate()).ref_update(r.pid, MAIN, r.c1.hash, 1), Reason.UNKNOWN_SIGNER)
    # AGENT keys may push; restricted ones only to their projects
    restricted = add_key(h, a, pb.KEY_SCOPE_AGENT, [other.pid])
    err = h.reject(restricted.ref_update(r.pid, MAIN, r.c1.hash, 1), Reason.PROJECT_NOT_ALLOWED)
    assert err.values == {"project": r.pid.hex()}
    h.commit(restricted.ref_update(other.pid, MAIN, other.c1.hash, 1))
    unrestricted = add_key(h, a, pb.KEY_SCOPE_AGENT)
    h.commit(unrestricted.ref_update(r.pid, MAIN, r.c1.hash, 1))
    ref = h.state().ref(r.pid, MAIN)
    assert ref is not None and ref.owner_address == a.address


def test_ref_update_project_state(h: Harness) -> None:
    a = h.actor()
    archived, removed = Repo(h, a, "arch"), Repo(h, a, "gone")
    h.commit(a.b.project_archive(archived.pid), a.b.project_remove(removed.pid))
    h.reject(a.b.ref_update(bytes(32), MAIN, archived.c1.hash, 1), Reason.PROJECT_NOT_FOUND)
    h.reject(a.b.ref_update(archived.pid, MAIN, archived.c1.hash, 1), Reason.PROJECT_ARCHIVED)
    h.reject(a.b.ref_update(removed.pid, MAIN, removed.c1.hash, 1), Reason.PROJECT_REMOVED)


def test_ref_update_limit_exceeded_at_201_refs(h: Harness) -> None:
    a = h.actor()
    r = Repo(h, a)
    names = [f"refs/tags/v{i}".encode() for i in range(C.MAX_REFS_PER_PROJECT)]
    h.commit(*(a.b.ref_update(r.pid, n, r.c1.hash, 1) for n in names))
    assert h.project(r.pid).ref_count == C.MAX_REFS_PER_PROJECT
    err = h.reject(a.b.ref_update(r.pid, MAIN, r.c1.hash, 1), Reason.LIMIT_EXCEEDED)
    assert err.values == {"what": "refs per project", "limit": C.MAX_REFS_PER_PROJECT}
    # existing refs still move, and deleting one frees a slot
    h.commit(a.b.ref_update(r.pid, names[0], r.c2.hash, 2))
    h.commit(a.b.ref_delete(r.pid, names[1], 2))
    h.commit(a.b.ref_update(r.pid, MAIN, r.c1.hash, 1))
    assert h.project(r.pid).ref_count == C.MAX_REFS_PER_PROJECT


# ---------------------------------------------------------------- REF_DELETE
def test_ref_delete_and_recreate(h: Harness) -> None:
    a = h.actor()
    r = Repo(h, a)
    h.commit(a.b.ref_update(r.pid, MAIN, r.c1.hash, 1), a.b.ref_update(r.pid, DEV, r.c2.hash, 1))
    t, number = h.now, h.chain.height + 1
    out = h.commit(a.b.ref_delete(r.pid, DEV, 2, old_hash=r.c2.hash))
    assert h.state().ref(r.pid, DEV) is None
    assert h.project(r.pid).ref_count == 1
    assert ref_log(h, r.pid, DEV, out.applied[0].event_id) == state_pb2.RefLogEntry(
        project_id=r.pid,
        ref_name=DEV,
        old_hash=r.c2.hash,
        nonce=2,
        owner_address=a.address,
        timestamp=t,
        message_hash=out.applied[0].message.hash,
        block_number=number,
        deleted=True,
    )
    # a deleted ref starts over at nonce 1
    h.reject(a.b.ref_update(r.pid, DEV, r.c3.hash, 3), Reason.REF_NONCE_MISMATCH)
    h.commit(a.b.ref_update(r.pid, DEV, r.c3.hash, 1))
    assert h.project(r.pid).ref_count == 2


def test_ref_delete_rejections(h: Harness) -> None:
    a = h.actor()
    r = Repo(h, a)
    reader = collaborator(h, r, READ)
    h.commit(a.b.ref_update(r.pid, MAIN, r.c1.hash, 1))
    err = h.reject(a.b.ref_delete(r.pid, DEV, 1), Reason.REF_NOT_FOUND)
    assert err.values == {"ref": DEV.hex()}
    err = h.reject(a.b.ref_delete(r.pid, MAIN, 1), Reason.REF_NONCE_MISMATCH)
    assert err.values == {"expected": 2, "got": 1}
    h.reject(a.b.ref_delete(r.pid, MAIN, 2, old_hash=r.c2.hash), Reason.REF_HASH_MISMATCH)
    h.reject(reader.b.ref_delete(r.pid, MAIN, 2), Reason.PERMISSION_DENIED)
    h.reject(add_key(h, a, pb.KEY_SCOPE_AGENT, [bytes(32)]).ref_delete(r.pid, MAIN, 2), Reason.PROJECT_NOT_ALLOWED)
    h.reject(a.b.ref_delete(bytes(32), MAIN, 1), Reason.PROJECT_NOT_FOUND)
    msg = a.b.ref_delete(r.pid, MAIN, 2)
    for fields, bad in (
        ({"project_id": b""}, "project_id"),
        ({"ref_name": b""}, "ref_name"),
        ({"ref_name": b"\x00"}, "ref_name"),
        ({"old_hash": b"\x01" * 20}, "old_hash"),
        ({"nonce": 0}, "nonce"),
    ):
        assert h.reject(edit_body(msg, a.key, **fields), Reason.INVALID_FIELD).values["field"] == bad
    h.commit(a.b.project_archive(r.pid))
    h.reject(a.b.ref_delete(r.pid, MAIN, 2), Reason.PROJECT_ARCHIVED)
    h.commit(a.b.project_remove(r.pid))
    h.reject(a.b.ref_delete(r.pid, MAIN, 2), Reason.PROJECT_REMOVED)


# ---------------------------------------------------------------- COMMIT_BUNDLE
def test_commit_bundle_stores_commits_in_sequence(h: Harness) -> None:
    a = h.actor()
    pid = created_id(h.commit(a.b.project_create("p")))
    c1 = commit_meta(1)
    c2 = commit_meta(2, c1.hash)
    c2.tree_hash = b"\x07" * 32
    c2.content_digest = b"\x08" * 32
    author = h.new_actor().address
    c2.author_address = author
    number = h.chain.height + 1
    out = h.commit(a.b.commit_bundle(pid, [c1, c2]))
    mhash = out.applied[0].message.hash
    st = h.state()
    assert st.commit(pid, c1.hash) == state_pb2.Commit(
        project_id=pid,
        hash=c1.hash,
        title="commit 1",
        author_name="dev",
        author_timestamp=START,
        author_address=a.address,  # defaults to the pusher
        message_hash=mhash,
        block_number=number,
        sequence=1,
    )
    second = st.commit(pid, c2.hash)
    assert second is not None
    assert (list(second.parents), second.tree_hash, second.content_digest, second.author_address, second.sequence) == (
        [c1.hash],
        c2.tree_hash,
        c2.content_digest,
        author,
        2,
    )
    assert st.kv.get(schema.commit_by_sequence_key(pid, 1)) == c1.hash
    assert st.kv.get(schema.commit_by_sequence_key(pid, 2)) == c2.hash
    assert h.project(pid).commit_count == 2
    # overlapping bundles: known commits are skipped, new ones continue the sequence
    c3 = commit_meta(3, c2.hash, c1.hash)  # a merge commit
    h.commit(a.b.commit_bundle(pid, [c2, c3]))
    third = h.state().commit(pid, c3.hash)
    assert third is not None and third.sequence == 3
    assert h.project(pid).commit_count == 3
    # a bundle of only known commits changes nothing but is accepted
    h.commit(a.b.commit_bundle(pid, [c1]))
    assert h.project(pid).commit_count == 3


def test_commit_bundle_max_size_and_agent_key(h: Harness) -> None:
    a = h.actor()
    pid = created_id(h.commit(a.b.project_create("p")))
    commits = [commit_meta(0)]
    for i in range(1, C.MAX_COMMITS_PER_BUNDLE):
        commits.append(commit_meta(i, commits[-1].hash))
    agent = add_key(h, a, pb.KEY_SCOPE_AGENT, [pid])
    h.commit(agent.commit_bundle(pid, commits))
    assert h.project(pid).commit_count == C.MAX_COMMITS_PER_BUNDLE
    # fast-forward over the whole chain
    h.commit(a.b.ref_update(pid, MAIN, commits[0].hash, 1))
    h.commit(a.b.ref_update(pid, MAIN, commits[-1].hash, 2))


def test_commit_bundle_parent_rejections(h: Harness) -> None:
    a = h.actor()
    pid = created_id(h.commit(a.b.project_create("p")))
    c1 = commit_meta(1)
    c2 = commit_meta(2, c1.hash)
    err = h.reject(a.b.commit_bundle(pid, [c2]), Reason.COMMIT_NOT_FOUND)
    assert err.values == {"commit": c2.hash.hex(), "parent": c1.hash.hex()}
    h.reject(a.b.commit_bundle(pid, [c2, c1]), Reason.COMMIT_NOT_FOUND)  # parent must come first
    selfish = commit_meta(5)
    selfish.parents.append(selfish.hash)
    h.reject(a.b.commit_bundle(pid, [selfish]), Reason.COMMIT_NOT_FOUND)


def test_commit_bundle_limits(h: Harness) -> None:
    a = h.actor()
    pid = created_id(h.commit(a.b.project_create("p")))
    too_many = [commit_meta(i) for i in range(C.MAX_COMMITS_PER_BUNDLE + 1)]
    err = h.reject(a.b.commit_bundle(pid, too_many), Reason.LIMIT_EXCEEDED)
    assert err.values == {"limit": C.MAX_COMMITS_PER_BUNDLE, "got": C.MAX_COMMITS_PER_BUNDLE + 1}
    h.reject(a.b.commit_bundle(pid, []), Reason.LIMIT_EXCEEDED)


def _bad_commit(**fields: Any) -> pb.CommitMeta:
    c = commit_meta(1)
    for name, value in fields.items():
        if name == "parents":
            c.parents.extend(value)
        else:
            setattr(c, name, value)
    return c


@pytest.mark.parametrize(
    ("commits", "bad"),
    [
        ([commit_meta(1), commit_meta(1)], "commits.hash"),
        ([_bad_commit(hash=b"\x01" * 31)], "commits[0].hash"),
        ([_bad_commit(parents=[bytes([i]) * 32 for i in range(C.MAX_COMMIT_PARENTS + 1)])], "commits[0].parents"),
        ([_bad_commit(parents=[b"\x01" * 31])], "commits[0].parents[0]"),
        ([commit_meta(0), _bad_commit(tree_hash=b"\x01")], "commits[1].tree_hash"),
        ([_bad_commit(author_address=b"\x01" * 32)], "commits[0].author_address"),
        ([_bad_commit(content_digest=b"\x01" * 20)], "commits[0].content_digest"),
        ([_bad_commit(title="t" * (C.MAX_TITLE_LEN + 1))], "commits[0].title"),
        ([_bad_commit(author_name="n" * (C.MAX_TITLE_LEN + 1))], "commits[0].author_name"),
    ],
)
def test_commit_bundle_invalid_field(h: Harness, commits: list[pb.CommitMeta], bad: str) -> None:
    a = h.actor()
    msg = a.b.commit_bundle(bytes(32), commits)
    assert h.reject(msg, Reason.INVALID_FIELD).values["field"] == bad


def test_commit_bundle_invalid_project_id(h: Harness) -> None:
    a = h.actor()
    err = h.reject(a.b.commit_bundle(b"\x01" * 31, [commit_meta(1)]), Reason.INVALID_FIELD)
    assert err.values["field"] == "project_id"


def test_commit_bundle_permissions_and_project_state(h: Harness) -> None:
    a = h.actor()
    r = Repo(h, a)
    reader = collaborator(h, r, READ)
    writer = collaborator(h, r, WRITE)
    stranger = h.actor()
    c = commit_meta(10, r.c1.hash)
    h.reject(stranger.b.commit_bundle(r.pid, [c]), Reason.PERMISSION_DENIED)
    h.reject(reader.b.commit_bundle(r.pid, [c]), Reason.PERMISSION_DENIED)
    h.reject(add_key(h, a, pb.KEY_SCOPE_AGENT, [bytes(32)]).commit_bundle(r.pid, [c]), Reason.PROJECT_NOT_ALLOWED)
    h.reject(a.b.commit_bundle(bytes(32), [c]), Reason.PROJECT_NOT_FOUND)
    h.commit(writer.b.commit_bundle(r.pid, [c]))
    stored = h.state().commit(r.pid, c.hash)
    assert stored is not None and stored.author_address == writer.address
    h.commit(a.b.project_archive(r.pid))
    h.reject(a.b.commit_bundle(r.pid, [commit_meta(11)]), Reason.PROJECT_ARCHIVED)
    h.commit(a.b.project_remove(r.pid))
    h.reject(a.b.commit_bundle(r.pid, [commit_meta(11)]), Reason.PROJECT_REMOVED)


def test_commit_bundle_past_the_limit_is_accepted(h: Harness) -> None:
    """Past MAX_COMMITS_PER_PROJECT a bundle is accepted and prunes what nothing protects (here: nothing is
    unprotected, the bundle's history being all of it); test_commit_pruning.py has the rule's cases."""
    a = h.actor()
    pid = created_id(h.commit(a.b.project_create("p")))
    per = C.MAX_COMMITS_PER_BUNDLE
    for start in range(0, C.MAX_COMMITS_PER_PROJECT, per):
        first = commit_meta(start, *([commit_meta(start - 1).hash] if start else []))
        chunk = [first] + [commit_meta(i, commit_meta(i - 1).hash) for i in range(start + 1, start + per)]
        h.commit(a.b.commit_bundle(pid, chunk))
    assert h.project(pid).commit_count == C.MAX_COMMITS_PER_PROJECT
    last = commit_meta(C.MAX_COMMITS_PER_PROJECT - 1).hash
    h.commit(a.b.commit_bundle(pid, [commit_meta(C.MAX_COMMITS_PER_PROJECT, last)]))
    assert h.project(pid).commit_count == C.MAX_COMMITS_PER_PROJECT + 1
    h.commit(a.b.commit_bundle(pid, [commit_meta(0)]))  # known commits are not counted


def test_fast_forward_walk_is_bounded(h: Harness) -> None:
    """The ancestry walk visits at most MAX_FAST_FORWARD_DEPTH commits (here across a fork); beyond: force."""
    a = h.actor()
    src = created_id(h.commit(a.b.project_create("src")))
    chain = [commit_meta(0)]
    for i in range(1, C.MAX_COMMITS_PER_PROJECT):
        chain.append(commit_meta(i, chain[-1].hash))
    per = C.MAX_COMMITS_PER_BUNDLE
    for start in range(0, len(chain), per):
        h.commit(a.b.commit_bundle(src, chain[start : start + per]))
    fork = created_id(h.commit(a.b.fork(src, "fork")))
    d0 = commit_meta(100_000, chain[-1].hash)
    d1 = commit_meta(100_001, d0.hash)
    h.commit(a.b.commit_bundle(fork, [d0, d1]), a.b.ref_update(fork, MAIN, chain[0].hash, 1))
    err = h.reject(a.b.ref_update(fork, MAIN, d1.hash, 2), Reason.NOT_FAST_FORWARD)
    assert err.values == {"limit": C.MAX_FAST_FORWARD_DEPTH}
    h.commit(a.b.ref_update(fork, MAIN, d0.hash, 2))  # exactly at the bound: still a fast-forward
    h.commit(a.b.ref_update(fork, b"refs/heads/far", chain[0].hash, 1))
    h.commit(a.b.ref_update(fork, b"refs/heads/far", d1.hash, 2, force=True))
