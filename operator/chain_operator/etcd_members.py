"""etcd membership run by the operator: one member change at a time, each only on a healthy cluster.

The members the cluster should have are `wanted` (the etcd StatefulSet's ordinals `0..replicas-1`, each a
name, a peer URL and a client URL). Each `reconcile` looks at the cluster through etcd's member API and
makes at most one change:

- while a member is not answering, has not started yet (added, its pod still joining) or there is no leader
  the cluster is not healthy and nothing changes (`WAIT`), with one exception: a wanted member that has
  answered nothing for `replace_after` seconds while the others keep a quorum is lost (its pod came back
  with an empty volume, which etcd refuses to run under the old member id) and is replaced: removed and
  added again under the same peer URL, so its pod joins as a new member with `existing` (`REPLACE`);
- a member that is not wanted (a scale-in) is removed, the highest ordinal first (`REMOVE`); its pod goes
  after that;
- a wanted member that is missing (a scale-out) is added, the lowest ordinal first (`ADD`); its pod starts
  after that, with `existing` and the membership the answer names (`Change.initial_cluster`);
- otherwise the cluster is as wanted (`DONE`).

Every answer says how many ordinals' pods should run (`Change.running`: up to the highest member the cluster
has, so a removed member's pod stops only after its removal and an added member's pod starts only after its
addition).

etcd itself refuses a change that would leave the started members without a quorum (its strict
reconfiguration check), so a refusal is a `ChainError` and the next tick looks again.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from node.errors import ChainError
from node.server.ordering.etcd.client import EtcdClient, EtcdUnavailable, Member
from node.server.ordering.etcd.rpc_pb2 import StatusResponse
from node.tls import ClientTLS

log = logging.getLogger("chain.operator.etcd")


MAX_MEMBERS = 64  # ordinals looked at when telling a member's ordinal from its peer URL
MAX_LAG = 1000  # raft entries a member may be behind the leader and count as caught up


@dataclass(frozen=True)
class Wanted:
    """A member the cluster should have: its name (the pod's), peer URL and client URL."""

    name: str
    peer_url: str
    client_url: str


Layout = Callable[[int], Wanted]  # the member an ordinal runs (name, URLs)


def ordinals(layout: Layout) -> dict[str, int]:
    """Peer URL -> ordinal, for every ordinal a cluster may have."""
    return {layout(i).peer_url: i for i in range(MAX_MEMBERS)}


class Kind(StrEnum):
    WAIT = "Wait"
    ADD = "Add"
    REMOVE = "Remove"
    REPLACE = "Replace"
    DONE = "Done"


@dataclass(frozen=True)
class Change:
    """What one reconcile did. `initial_cluster` is the membership after it (`name=peerURL,...`), what a
    member joining now starts with; `running` the ordinals whose pods should run now."""

    kind: Kind
    member: str = ""
    detail: str = ""
    initial_cluster: str = ""
    running: int = 0
    member_id: int = 0  # the id etcd gave the member added (ADD, REPLACE)


@dataclass(frozen=True)
class Health:
    answering: frozenset[int]  # ids of the members that answered following the leader, caught up (`health`)
    leaders: frozenset[int]  # the leader ids they named (one when healthy)

    def healthy(self, members: Sequence[Member]) -> bool:
        started = [m for m in members if m.name]
        return (
            len(started) == len(members)
            and all(m.ID in self.answering for m in members)
            and len(self.leaders) == 1
            and 0 not in self.leaders
        )


@dataclass
class Tracker:
    """When each member was first seen not answering (by name); kept by the caller across ticks."""

    silent_since: dict[str, float] = field(default_factory=dict)

    def observe(self, members: Sequence[Member], health: Health, now: float) -> None:
        for m in members:
            name = _name_of(m)
            if m.ID in health.answering or not m.name:
                self.silent_since.pop(name, None)
            else:
                self.silent_since.setdefault(name, now)

    def silent_for(self, name: str, now: float) -> float:
        since = self.silent_since.get(name)
        return 0.0 if since is None else now - since


def _name_of(m: Member) -> str:
    return m.name or (m.peerURLs[0] if m.peerURLs else str(m.ID))


async def health(
    members: Sequence[Member], tls: ClientTLS | None, *, timeout: float = 2.0, max_lag: int = MAX_LAG
) -> Health:
    """Ask every started member for its status, each alone (a member that does not answer is not asked
    through another). A member counts as answering when it follows the leader most of them name, in the
    leader's term, with its applied index within `max_lag` of the leader's raft index: a member whose volume
    was emptied may answer for a moment before its first heartbeat, behind by the whole log."""

    async def ask(m: Member) -> tuple[int, StatusResponse] | None:
        if not m.clientURLs:
            return None
        client = EtcdClient(list(m.clientURLs), tls=tls, timeout=timeout)
        try:
            status = await client.member_status(0)
        except EtcdUnavailable:
            return None
        finally:
            await client.close()
        return (m.ID, status) if not status.errors else None

    answers = dict(a for a in await asyncio.gather(*(ask(m) for m in members)) if a is not None)
    named = [int(s.leader) for s in answers.values() if s.leader]
    if not named:
        return Health(frozenset(), frozenset())
    leader_id = max(set(named), key=named.count)
    leader = answers.get(leader_id)
    if leader is None:  # the leader they name does not answer itself
        return Health(frozenset(), frozenset({leader_id}))
    following = frozenset(
        i
        for i, s in answers.items()
        if s.leader == leader_id and s.raftTerm == leader.raftTerm and s.raftAppliedIndex + max_lag >= leader.raftIndex
    )
    return Health(following, frozenset(int(s.leader) for s in answers.values()))


def initial_cluster(members: Sequence[Member], wanted: Sequence[Wanted]) -> str:
    """`name=peerURL,...` of `members`, naming a member not started yet after the wanted one of its URL."""
    names = {w.peer_url: w.name for w in wanted}
    parts = []
    for m in members:
        url = m.peerURLs[0] if m.peerURLs else ""
        parts.append(f"{m.name or names.get(url, url)}={url}")
    return ",".join(sorted(parts))


@dataclass
class Members:
    """The reconciler of one etcd cluster: `client` reaches it (any member), `wanted` is in ordinal order."""

    client: EtcdClient
    tls: ClientTLS | None = None
    replace_after: float = 300.0
    tracker: Tracker = field(default_factory=Tracker)
    clock: Callable[[], float] = time.monotonic

    async def reconcile(self, layout: Layout, size: int) -> Change:
        """One step towards ordinals `0..size-1` as the members."""
        wanted = [layout(i) for i in range(size)]
        known = ordinals(layout)
        members = await self.client.member_list()
        seen = await health(members, self.tls)
        now = self.clock()
        self.tracker.observe(members, seen, now)
        by_url = {w.peer_url: i for i, w in enumerate(wanted)}
        running = _running(members, known)
        if not seen.healthy(members):
            lost = self._lost(members, seen, by_url, now)
            if lost is None:
                why = _unhealthy(members, seen)
                return Change(Kind.WAIT, detail=why, initial_cluster=initial_cluster(members, wanted), running=running)
            return await self._replace(lost, wanted, known)
        extra = [m for m in members if (m.peerURLs[0] if m.peerURLs else "") not in by_url]
        if extra:
            doomed = max(extra, key=lambda m: known.get(m.peerURLs[0] if m.peerURLs else "", MAX_MEMBERS))
            await self.client.member_remove(doomed.ID)
            after = [m for m in members if m.ID != doomed.ID]
            log.info("etcd: removed member %s (%x)", doomed.name, doomed.ID)
            return Change(
                Kind.REMOVE, doomed.name, "not wanted", initial_cluster(after, wanted), _running(after, known)
            )
        present = {m.peerURLs[0] for m in members if m.peerURLs}
        missing = [w for w in wanted if w.peer_url not in present]
        if missing:
            new = missing[0]
            added = await self.client.member_add([new.peer_url])
            after = [*members, added]
            log.info("etcd: added member %s (%x) at %s", new.name, added.ID, new.peer_url)
            cluster = initial_cluster(after, wanted)
            return Change(Kind.ADD, new.name, "wanted", cluster, _running(after, known), member_id=added.ID)
        return Change(Kind.DONE, initial_cluster=initial_cluster(members, wanted), running=running)

    def _lost(self, members: Sequence[Member], seen: Health, by_url: dict[str, int], now: float) -> Member | None:
        """A started, wanted member silent past `replace_after` while the others answer with one leader."""
        silent = [m for m in members if m.ID not in seen.answering]
        if len(silent) != 1 or len(seen.leaders) != 1 or 0 in seen.leaders:
            return None
        m = silent[0]
        if not m.name or not m.peerURLs or m.peerURLs[0] not in by_url:
            return None
        return m if self.tracker.silent_for(m.name, now) >= self.replace_after else None

    async def _replace(self, lost: Member, wanted: Sequence[Wanted], known: dict[str, int]) -> Change:
        silent = self.tracker.silent_for(lost.name, self.clock())
        await self.client.member_remove(lost.ID)
        added = await self.client.member_add(list(lost.peerURLs))
        self.tracker.silent_since.pop(lost.name, None)
        members = await self.client.member_list()
        log.warning("etcd: member %s answered nothing for %.0f s: replaced by %x", lost.name, silent, added.ID)
        detail = f"silent for {silent:.0f} s"
        cluster = initial_cluster(members, wanted)
        return Change(Kind.REPLACE, lost.name, detail, cluster, _running(members, known), member_id=added.ID)


def _running(members: Sequence[Member], known: dict[str, int]) -> int:
    """How many ordinals' pods should run: up to the highest member the cluster has (a StatefulSet runs
    ordinals 0..n-1)."""
    found = [known[m.peerURLs[0]] for m in members if m.peerURLs and m.peerURLs[0] in known]
    return max(found) + 1 if found else 0


def _unhealthy(members: Sequence[Member], seen: Health) -> str:
    unstarted = [m.peerURLs[0] for m in members if not m.name and m.peerURLs]
    if unstarted:
        return "waiting for added members to start: " + ", ".join(unstarted)
    silent = [m.name for m in members if m.ID not in seen.answering]
    if silent:
        return "members not answering: " + ", ".join(silent)
    return f"no single leader (members name {sorted(seen.leaders)})"


async def converge(
    members: Members,
    layout: Layout,
    size: int,
    apply: Callable[[Change], Awaitable[None]],
    *,
    timeout: float,
    poll: float = 0.2,
) -> list[Change]:
    """Reconcile until DONE, letting `apply` make the pods match after each step (what the operator does one
    step per tick); the changes made. A refused step (no quorum for it yet, a leader just elected) is tried
    again at the next poll."""
    deadline = time.monotonic() + timeout
    made: list[Change] = []
    last = ""
    while time.monotonic() < deadline:
        try:
            change = await members.reconcile(layout, size)
        except ChainError as exc:
            last = f"refused: {exc}"
        else:
            await apply(change)
            if change.kind is Kind.DONE:
                return made
            if change.kind is not Kind.WAIT:
                made.append(change)
            last = f"{change.kind} {change.member} {change.detail}"
        await asyncio.sleep(poll)
    raise ChainError(f"etcd membership did not converge within {timeout:g} s: {last}")
