"""Commit pruning (node/state/handlers/pruning.py): a project past the commit limit keeps every commit its
refs (and the bundle) reach and prunes the oldest others. The limit and the walk's bound are lowered here
(monkeypatched constants) so a case takes a few dozen commits; one test runs at the real limit.

Each rule has a test that fails when the rule alone is removed (checked by mutation): the protected set
(`test_refs_protect...`), the bundle's own ancestry (`test_the_bundles_own_history...`), oldest first
(`test_refs_protect...`'s exact set), the walk's bound (`test_a_protected_set_at_the_bound...`), the count
and sequence (`test_sequences_stay_unique...`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from chain.v1 import message_pb2 as pb
from node import constants as C
from node.errors import Reason
from node.storage import schema
from tests.harness import Actor, Harness, commit_meta
from tests.harness import commit_line as line
from tests.node.state.helpers import created_id

MAIN = b"refs/heads/main"
LIMIT = 10


@pytest.fixture
def h(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Harness:
    monkeypatch.setattr(C, "MAX_COMMITS_PER_PROJECT", LIMIT)
    return Harness(tmp_path / "chain")


def hashes(metas: list[pb.CommitMeta]) -> set[bytes]:
    return {bytes(m.hash) for m in metas}


def kept(h: Harness, pid: bytes, metas: list[pb.CommitMeta]) -> set[bytes]:
    st = h.state()
    return {bytes(m.hash) for m in metas if st.commit(pid, m.hash) is not None}


def indexed(h: Harness, pid: bytes) -> list[bytes]:
    """The by-sequence index, oldest first."""
    st = h.state()
    return [v for _, v in st.kv.scan(schema.commits_by_sequence_prefix(pid), reverse=True)]


def project_with(h: Harness, a: Actor, name: str = "p") -> bytes:
    return created_id(h.commit(a.b.project_create(name)))


def test_refs_protect_their_history_and_the_oldest_unreachable_go_first(h: Harness) -> None:
    a = h.actor()
    pid = project_with(h, a)
    main = line(0, 6)
    abandoned = line(100, 4)  # no ref reaches these
    h.commit(a.b.commit_bundle(pid, main), a.b.ref_update(pid, MAIN, main[-1].hash, 1))
    h.commit(a.b.commit_bundle(pid, abandoned))
    assert h.project(pid).commit_count == LIMIT  # at the limit: nothing pruned yet
    more = line(200, 3, main[-1].hash)  # 13 commits: 3 over
    h.commit(a.b.commit_bundle(pid, more))
    assert kept(h, pid, abandoned) == hashes(abandoned[3:])  # exactly the three oldest unreachable ones
    assert kept(h, pid, main + more) == hashes(main + more)
    assert h.project(pid).commit_count == LIMIT
    assert set(indexed(h, pid)) == hashes(main + more + abandoned[3:])
    gone = abandoned[0].hash
    h.reject(a.b.ref_update(pid, b"refs/heads/old", gone, 1), Reason.COMMIT_NOT_FOUND)
    h.reject(a.b.like(pid, gone), Reason.COMMIT_NOT_FOUND)


def test_deleting_a_branch_makes_its_commits_prunable_at_the_next_bundle(h: Harness) -> None:
    a = h.actor()
    pid = project_with(h, a)
    main, side = line(0, 5), line(100, 5)
    dev = b"refs/heads/dev"
    h.commit(
        a.b.commit_bundle(pid, main + side),
        a.b.ref_update(pid, MAIN, main[-1].hash, 1),
        a.b.ref_update(pid, dev, side[-1].hash, 1),
    )
    tip = commit_meta(300, main[-1].hash)
    h.commit(a.b.commit_bundle(pid, [tip]))  # 11: every commit protected, none pruned
    assert h.project(pid).commit_count == LIMIT + 1 and kept(h, pid, side) == hashes(side)
    h.commit(a.b.ref_delete(pid, dev, 2))
    assert kept(h, pid, side) == hashes(side)  # a deletion prunes nothing by itself
    h.commit(a.b.commit_bundle(pid, [commit_meta(301, tip.hash)]))  # 12: two over, the side's oldest two
    assert kept(h, pid, side) == hashes(side[2:])
    assert h.project(pid).commit_count == LIMIT


def test_the_bundles_own_history_is_protected(h: Harness) -> None:
    """A bundle whose commits nothing references yet keeps them and what they descend from; a later bundle
    prunes them unless a ref reached them meanwhile (what `chainctl push` does between bundles)."""
    a = h.actor()
    pid = project_with(h, a)
    first = line(0, 8)
    h.commit(a.b.commit_bundle(pid, first))
    second = line(100, 4, first[-1].hash)  # 12 commits, no ref at all: all are the bundle's history
    h.commit(a.b.commit_bundle(pid, second))
    assert kept(h, pid, first + second) == hashes(first + second)
    third = line(200, 2)  # unrelated: now the older lines are unprotected
    h.commit(a.b.commit_bundle(pid, third))
    assert h.project(pid).commit_count == LIMIT
    assert kept(h, pid, first + second + third) == hashes(first[4:] + second + third)


def test_a_protected_set_at_the_bound_skips_pruning(h: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    a = h.actor()
    pid = project_with(h, a)
    main, abandoned = line(0, 7), line(100, 3)
    h.commit(a.b.commit_bundle(pid, abandoned))
    h.commit(a.b.commit_bundle(pid, main), a.b.ref_update(pid, MAIN, main[-1].hash, 1))  # 10: at the limit
    monkeypatch.setattr(C, "MAX_PROTECTED_SET", 8)
    tip = commit_meta(300, main[-1].hash)  # the walk from main's head reaches 8: the bound
    h.commit(a.b.commit_bundle(pid, [tip]))
    assert kept(h, pid, abandoned) == hashes(abandoned) and h.project(pid).commit_count == 11
    monkeypatch.setattr(C, "MAX_PROTECTED_SET", 10)  # the next walk ends at 9, below it: pruning runs
    h.commit(a.b.commit_bundle(pid, [commit_meta(301, tip.hash)]))
    assert kept(h, pid, abandoned) == hashes(abandoned[2:]) and h.project(pid).commit_count == LIMIT


def test_sequences_stay_unique_once_commits_are_pruned(h: Harness) -> None:
    """A commit's sequence is its place among every commit the project indexed, pruned ones included; the
    last one handed out is public state only once the project has pruned."""
    a = h.actor()
    pid = project_with(h, a)
    h.commit(a.b.commit_bundle(pid, line(0, LIMIT)))
    assert h.state().kv.get(schema.commit_sequence_key(pid)) is None  # no pruning: no record
    newest = line(100, 3)
    h.commit(a.b.commit_bundle(pid, newest))  # the first line is unprotected: its 3 oldest go
    st = h.state()
    assert st.kv.get(schema.commit_sequence_key(pid)) == schema.u64(LIMIT + 3)
    assert [st.commit(pid, m.hash).sequence for m in newest] == [LIMIT + 1, LIMIT + 2, LIMIT + 3]  # type: ignore[union-attr]
    again = commit_meta(500)
    h.commit(a.b.commit_bundle(pid, [again]))
    st = h.state()
    assert st.commit(pid, again.hash).sequence == LIMIT + 4  # type: ignore[union-attr]
    sequences = [st.commit(pid, c).sequence for c in indexed(h, pid)]  # type: ignore[union-attr]
    assert sequences == sorted(set(sequences)) and len(sequences) == LIMIT


def test_a_fork_counts_and_prunes_its_own_commits_only(h: Harness) -> None:
    a = h.actor()
    src = project_with(h, a, "src")
    base = line(0, 5)
    h.commit(a.b.commit_bundle(src, base), a.b.ref_update(src, MAIN, base[-1].hash, 1))
    fork = created_id(h.commit(a.b.fork(src, "fork")))
    own = line(100, LIMIT, base[-1].hash)
    h.commit(a.b.commit_bundle(fork, own))
    loose = line(200, 2)  # over by 2: the fork's oldest unprotected, never the source's
    h.commit(a.b.commit_bundle(fork, loose))
    assert h.project(fork).commit_count == LIMIT
    assert kept(h, fork, own) == hashes(own[2:])
    assert kept(h, src, base) == hashes(base)


def test_at_the_real_limit(tmp_path: Path) -> None:
    """The shipped constants: 10,000 commits on main, 1,000 abandoned, 1,000 more on main: the 1,000
    abandoned go."""
    h = Harness(tmp_path / "chain")
    a = h.actor()
    pid = project_with(h, a)
    per = C.MAX_COMMITS_PER_BUNDLE
    abandoned = line(10**6, per)
    h.commit(a.b.commit_bundle(pid, abandoned))
    main = line(0, C.MAX_COMMITS_PER_PROJECT)
    for start in range(0, len(main), per):
        chunk = main[start : start + per]
        h.commit(a.b.commit_bundle(pid, chunk), a.b.ref_update(pid, MAIN, chunk[-1].hash, start // per + 1))
    assert kept(h, pid, abandoned) == set()  # the main line's bundles pruned them as it grew
    tail = line(2 * 10**6, per, main[-1].hash)
    h.commit(a.b.commit_bundle(pid, tail))  # every commit protected: the project stays over the limit
    assert h.project(pid).commit_count == C.MAX_COMMITS_PER_PROJECT + per
