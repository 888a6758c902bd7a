"""Staging refs (node/sdk/staging.py): which tips a push holds between bundles, and the REF_UPDATEs that do it."""

from __future__ import annotations

from chain.v1 import message_pb2 as pb
from chain.v1 import state_pb2
from node import constants as C
from node.sdk.staging import STAGING_PREFIX, StagingRefs, needs_staging, tips_to_stage
from tests.fixtures.actors import RemoteActor
from tests.harness import commit_meta

PID = b"\x07" * 32


def test_a_linear_history_needs_no_staging_ref() -> None:
    line = [commit_meta(0)]
    for i in range(1, 9):
        line.append(commit_meta(i, line[-1].hash))
    assert tips_to_stage([line[:3], line[3:6], line[6:]]) == [[], []]


def test_the_tips_the_next_bundle_does_not_descend_from_are_staged() -> None:
    root = commit_meta(0)
    a1, b1 = commit_meta(1, root.hash), commit_meta(2, root.hash)  # two branches from the root
    a2, b2 = commit_meta(3, a1.hash), commit_meta(4, b1.hash)
    merge = commit_meta(5, a2.hash, b2.hash)
    stage = tips_to_stage([[root, a1, b1], [a2], [b2], [merge]])
    assert stage[0] == sorted([bytes(b1.hash)])  # a1 is the next bundle's parent: it protects a1's history
    assert stage[1] == [bytes(a2.hash)]  # b1 is named by the next bundle (b2)
    assert stage[2] == []  # the merge names both tips


def test_staging_refs_reuse_their_slots_and_carry_nonces_and_old_hashes() -> None:
    b = RemoteActor().b
    old = state_pb2.Ref(name=STAGING_PREFIX + b"0", hash=b"\x01" * 32, nonce=4)  # an interrupted push's
    refs = StagingRefs.on_chain(PID, {bytes(old.name): old, b"refs/heads/main": state_pb2.Ref(nonce=1)})
    x, y = b"\x0a" * 32, b"\x0b" * 32
    first = refs.point_at(b, [x, y])
    bodies = [m.data.ref_update for m in first]
    assert [(u.ref_name, u.new_hash, u.nonce, u.old_hash, u.force) for u in bodies] == [
        (STAGING_PREFIX + b"0", x, 5, b"\x01" * 32, True),
        (STAGING_PREFIX + b"1", y, 1, b"", True),
    ]
    assert refs.point_at(b, [y]) == []  # already held
    deletes = [m.data.ref_delete for m in refs.deletes(b)]
    assert [(d.ref_name, d.nonce, d.old_hash) for d in deletes] == [
        (STAGING_PREFIX + b"0", 6, x),
        (STAGING_PREFIX + b"1", 2, y),
    ]
    assert all(m.data.type == pb.MESSAGE_TYPE_REF_DELETE for m in refs.deletes(b))


def test_only_a_push_past_the_limit_with_several_bundles_stages() -> None:
    project = state_pb2.Project(commit_count=C.MAX_COMMITS_PER_PROJECT - 10)
    assert not needs_staging(project, 10, 5)
    assert needs_staging(project, 11, 2)
    assert not needs_staging(project, 11, 1)  # one bundle protects its own history
