"""Commit pruning: a project past MAX_COMMITS_PER_PROJECT drops its oldest commits that nothing protects.

Makechain's rule (its specification, "Commit Pruning"), run at the end of every COMMIT_BUNDLE that leaves
its project with more than MAX_COMMITS_PER_PROJECT commits:

- protected: every commit of the project reachable over parent links from one of its refs' heads, or from
  a commit the bundle itself names (what it adds is accepted, and with its history). One breadth-first walk
  from those heads, in a fixed order (the refs in key order, then the bundle's commits in its order); it
  counts the project's own commits only (a fork stops at its source's) and stops at MAX_PROTECTED_SET: a
  project whose protected set reaches that bound prunes nothing in that bundle.
- pruned: the oldest unprotected commits, in the order the project indexed them (their sequence), until
  the project is back at the limit or nothing unprotected is left. A pruned commit leaves the commit table
  and the by-sequence index; GetCommit answers NOT_FOUND and a ref or reaction naming it is refused
  (COMMIT_NOT_FOUND). Reactions already made stay their authors' (removable as before).
- sequence: a commit's sequence stays its position among every commit the project ever indexed. Once a
  project has pruned, its commit count no longer says how many that is, so the last sequence handed out is
  kept as public state (`schema.commit_sequence_key`); a project that never pruned has no such record and
  numbers its commits by its count, as always.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

from chain.v1 import state_pb2
from node import constants as C
from node.state.access import StateAccess
from node.storage import schema


def last_sequence(st: StateAccess, project: state_pb2.Project) -> int:
    """The sequence of the project's newest indexed commit (0: none yet)."""
    raw = st.kv.get(schema.commit_sequence_key(project.project_id))
    return int.from_bytes(raw, "big") if raw is not None else project.commit_count


def record_sequence(st: StateAccess, project: state_pb2.Project, last: int) -> None:
    """Keep `last` once the count stops saying it (the project has pruned: the record exists or is due)."""
    key = schema.commit_sequence_key(project.project_id)
    if last != project.commit_count or st.kv.get(key) is not None:
        st.kv.put(key, schema.u64(last))


def protected_set(st: StateAccess, project: state_pb2.Project, fresh: Iterable[bytes]) -> set[bytes] | None:
    """The project's commits reachable from its ref heads or from `fresh` (the bundle's commits); None when
    the walk reaches MAX_PROTECTED_SET (pruning is skipped)."""
    pid = project.project_id
    heads = [bytes(ref.hash) for _, ref in st.scan(state_pb2.Ref, schema.refs_prefix(pid))]
    queue = deque([*heads, *fresh])
    seen: set[bytes] = set()
    bound = C.MAX_PROTECTED_SET
    while queue:
        h = queue.popleft()
        if h in seen:
            continue
        commit = st.commit(pid, h)
        if commit is None:  # the source's (a fork), or already pruned: not the project's to count
            continue
        seen.add(h)
        if len(seen) >= bound:
            return None
        queue.extend(bytes(p) for p in commit.parents)
    return seen


def prune_commits(st: StateAccess, project: state_pb2.Project, fresh: Iterable[bytes]) -> int:
    """Prune the project's oldest unprotected commits while it is over the limit (commit_count is updated,
    the project record is the caller's to store); how many were pruned."""
    excess = project.commit_count - C.MAX_COMMITS_PER_PROJECT
    if excess <= 0:
        return 0
    protected = protected_set(st, project, fresh)
    if protected is None or len(protected) >= project.commit_count:  # at the bound, or nothing unprotected
        return 0
    pid = project.project_id
    doomed: list[tuple[bytes, bytes]] = []
    wanted = min(excess, project.commit_count - len(protected))  # the walk counted the project's own commits
    # the by-sequence index runs newest first (inverted sequence): oldest first is its reverse order
    for key, h in st.kv.scan(schema.commits_by_sequence_prefix(pid), reverse=True):
        if h not in protected:
            doomed.append((key, h))
            if len(doomed) == wanted:
                break
    for key, h in doomed:
        st.kv.delete(key)
        st.delete(schema.commit_key(pid, h))
    project.commit_count -= len(doomed)
    return len(doomed)
