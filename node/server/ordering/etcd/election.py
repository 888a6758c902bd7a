"""Leader election with an etcd lease.

Each member holds a lease (TTL `ttl` seconds, refreshed every ttl/3) and
campaigns by creating the `leader` key attached to it, only if the key is
absent. The key disappears when the leader's lease expires (crash, partition,
lost quorum) or is revoked (clean stop), and the next campaign wins. A member
believes it leads only while its last successful keep-alive is younger than
the TTL; that belief only saves futile work: safety comes from the fenced
append (etcd_log), which compares the leader key's lease with the writer's.

When it reads: each member holds a watch on the `leader` key (watch.py). While
the watch is live a member reads the key when the watch reports a change (a
leader's key deleted: it campaigns at once) and otherwise once per keep-alive
(every TTL/3); while the watch is not live it reads every `poll` seconds, as
it always did. A scheduled read that finds the key changed without a word
from the watch opens the watch again (a stream to an etcd member cut off
from its peers stays open and says nothing).

A member that must not lead (`unfit` says why: its store refuses commits, or
it halted on a diverged state) does not campaign, and a leader that turns
unfit deletes its key at once (compared with its lease), so a healthy member
is elected instead of the cluster's writes waiting on one member's disk. It
campaigns again once `unfit` has nothing to say. A lone member whose store keeps failing takes the key at
each of its store's retries and gives it up again when the retry fails (replicated.py); that is said once,
then at most once a minute with how many times it came back, and its re-election of itself is not a new
"leader is" line.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from node.observability.logs import Every
from node.server.ordering.etcd.client import (
    EtcdClient,
    EtcdUnavailable,
    cmp_absent,
    cmp_lease,
    op_delete,
    op_put,
    op_range,
)
from node.server.ordering.etcd.log import Keys
from node.server.ordering.etcd.watch import KeyWatch

log = logging.getLogger("chain.election")
MIN_WAIT = 0.01  # seconds between rounds at least, while the watch is live
UNAVAILABLE_LOG_EVERY = 5.0  # seconds between "etcd unavailable" lines while it lasts (rounds run 4 times a second)
GIVE_UP_LOG_EVERY = 60.0  # seconds between "gives up leadership" lines for one reason (a store retries every 5 s)


@dataclass(frozen=True)
class Leader:
    id: str
    addr: str
    lease: int


class Election:
    def __init__(
        self,
        client: EtcdClient,
        keys: Keys,
        node_id: str,
        addr: str,
        *,
        ttl: int,
        poll: float,
        unfit: Callable[[], str] = lambda: "",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`poll`: how often the leader key is read while its watch is not live. `unfit`: why this member
        must not lead now ("" when it may): it then gives up the key if it holds it, and does not campaign."""
        self.client = client
        self.keys = keys
        self.node_id = node_id
        self.addr = addr
        self.ttl = ttl
        self.poll = poll
        self.unfit = unfit
        self.clock = clock
        self._unfit_why = ""  # the reason last logged for standing aside
        self._gave_up = ("", 0.0, 0)  # the last give-up's reason, when it was logged, how many came since
        self._gave_up_at = 0.0  # when this member last gave up the key
        self._unavailable_since = 0.0  # when etcd stopped answering the rounds (0: it answers)
        self.failure: EtcdUnavailable | None = None  # why the last round failed (None: it went through)
        self._unavailable_line = Every(UNAVAILABLE_LOG_EVERY)
        self.lease = 0
        self.leader: Leader | None = None
        self.changes = 0  # leaders seen elected (metric chain.etcd.leader_changes)
        self._lease_valid_until = 0.0
        self._last_keepalive = 0.0
        self._last_seen = 0.0  # when the leader key was last read (or written)
        self._stopping = asyncio.Event()
        self._wake = asyncio.Event()  # the leader key changed (the watch), or stop
        self.watch = KeyWatch(client, keys.leader, self._wake, what="leader")
        self._revision: int | None = None  # the leader key's mod revision at the last read (0: absent)
        self._task: asyncio.Task[None] | None = None

    @property
    def is_leader(self) -> bool:
        return (
            self.leader is not None
            and self.leader.id == self.node_id
            and self.leader.lease == self.lease
            and self.clock() < self._lease_valid_until
        )

    @property
    def current(self) -> Leader | None:
        """The leader as last seen; None when there is none or etcd has not answered for a lease TTL."""
        if self.leader is None or self.clock() - self._last_seen > self.ttl:
            return None
        return self.leader

    def reconsider(self) -> None:
        """Run a round now (this member's fitness changed), not at the next keep-alive."""
        self._wake.set()

    async def start(self) -> None:
        self.watch.start()
        self._task = asyncio.create_task(self._run(), name="election")

    async def stop(self) -> None:
        """Stop campaigning and give up leadership at once (revoking the lease deletes the leader key)."""
        self._stopping.set()
        self._wake.set()
        if self._task is not None:
            await self._task
            self._task = None
        await self.watch.stop()
        if self.lease:
            try:
                await self.client.revoke(self.lease)
            except Exception:  # the lease expires on its own anyway
                log.warning("could not revoke lease %x on stop", self.lease)
            self.lease = 0

    async def _run(self) -> None:
        while not self._stopping.is_set():
            woken = self._wake.is_set()
            self._wake.clear()  # before the read: a change after it wakes the next round
            live = self.watch.live
            wait = self.poll
            try:
                known = self._revision
                await self._round()
                self._answered()
                if live:
                    if not woken and not self._wake.is_set() and known is not None and self._revision != known:
                        log.info("the leader key changed without a word from the watch; opening it again")
                        await self.watch.restart()
                    wait = max(MIN_WAIT, self.ttl / 3 - (self.clock() - self._last_keepalive))  # next keep-alive
            except EtcdUnavailable as exc:
                self._unavailable(exc)
            except Exception:  # a long-running loop never dies on one bad round
                log.exception("election round failed")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), wait)

    def _unavailable(self, exc: EtcdUnavailable) -> None:
        self.failure = exc
        now = time.monotonic()
        if not self._unavailable_since:
            self._unavailable_since = now
        if self._unavailable_line.due():
            log.warning("etcd unavailable (retrying): %s", exc)

    def _answered(self) -> None:
        self.failure = None
        if self._unavailable_since:
            log.info("etcd answers the election again after %.1f s", time.monotonic() - self._unavailable_since)
            self._unavailable_since = 0.0
            self._unavailable_line.reset()

    def _fitness(self) -> str:
        """Why this member must not lead now ("" when it may). A reason is logged when it first appears,
        not each time it comes back: a failing store lets the member campaign whenever its next attempt
        is due (replicated.py), so it can turn fit and unfit every few seconds for as long as it fails."""
        why = self.unfit()
        if why and why != self._unfit_why:
            log.warning("not campaigning for leadership: %s", why)
            self._unfit_why = why
        return why

    async def _round(self) -> None:
        now = self.clock()
        if self.lease and now - self._last_keepalive >= self.ttl / 3:
            sent = self.clock()
            remaining = await self.client.keepalive(self.lease)
            if remaining <= 0:
                log.warning("lease %x expired", self.lease)
                self.lease = 0
            else:
                self._last_keepalive = sent
                self._lease_valid_until = sent + remaining
        if not self.lease:
            sent = self.clock()
            self.lease = await self.client.grant(self.ttl)
            self._last_keepalive = sent
            self._lease_valid_until = sent + self.ttl
        # Read first and campaign only when the key is absent: a transaction with a put in it is a raft
        # proposal (a WAL write and an fsync on every etcd member) even when its compare fails and it writes
        # nothing, and every member asks several times a second. The read is linearizable, as the
        # transaction was; the campaign itself is still the compare-and-create.
        kvs = await self.client.range(self.keys.leader)
        why = self._fitness()
        if why and kvs and kvs[0].lease == self.lease:  # a leader key on our lease is ours: only we put one
            # Leading while unfit would stop the cluster's writes: the lease lives on (keep-alives do not need
            # the store), and every member forwards to the leader. Delete the key; the watch elects another.
            await self.client.txn([cmp_lease(self.keys.leader, self.lease)], [op_delete(self.keys.leader)])
            self._say_gave_up(why)
            self.leader, self._revision, self._last_seen = None, None, self.clock()
            return
        won = False
        if not kvs and not why:
            value = json.dumps({"id": self.node_id, "addr": self.addr}).encode()
            result = await self.client.txn(
                [cmp_absent(self.keys.leader)],
                [op_put(self.keys.leader, value, self.lease)],
                [op_range(self.keys.leader)],
            )
            won = result.succeeded
            kvs = [] if won else result.ranges(0)
        self._last_seen = self.clock()
        # what the next scheduled read compares with (unknown after our own put: its revision is the
        # transaction's, and the watch reports that put anyway)
        self._revision = None if won else int(kvs[0].mod_revision) if kvs else 0
        if won:
            leader = Leader(self.node_id, self.addr, self.lease)
        else:
            if not kvs:
                self.leader = None
                return
            doc = json.loads(kvs[0].value)
            leader = Leader(str(doc["id"]), str(doc["addr"]), kvs[0].lease)
            if leader.id == self.node_id and leader.lease != self.lease:
                # our own previous incarnation (a crash): its key would block everyone until the lease expires
                await self.client.txn([cmp_lease(self.keys.leader, leader.lease)], [op_delete(self.keys.leader)])
                log.info("removed the leader key of this node's previous run (lease %x)", leader.lease)
                self.leader = None
                return
        if leader != self.leader:
            self.changes += 1
            ours = leader.lease == self.lease
            level = logging.DEBUG if won and self._retaking() else logging.INFO
            log.log(level, "leader is %s at %s%s", leader.id, leader.addr, " (this node)" if ours else "")
        self.leader = leader

    def _say_gave_up(self, why: str) -> None:
        """Log a give-up when its reason is new or the last line is `GIVE_UP_LOG_EVERY` old (saying how many
        came in between); the others go to debug."""
        last, logged, since = self._gave_up
        now = self._gave_up_at = time.monotonic()
        if why != last or now - logged >= GIVE_UP_LOG_EVERY:
            again = f" (and {since} more times in the last {now - logged:.0f} s)" if why == last and since else ""
            log.warning("this node gives up leadership: %s%s", why, again)
            self._gave_up = (why, now, 0)
        else:
            log.debug("this node gives up leadership again: %s", why)
            self._gave_up = (why, logged, since + 1)

    def _retaking(self) -> bool:
        """Whether this member gave up the key within the last `GIVE_UP_LOG_EVERY`: winning it back is its
        store's retry, not news (a retry that commits says so itself: "storage recovered")."""
        return bool(self._gave_up_at) and time.monotonic() - self._gave_up_at < GIVE_UP_LOG_EVERY
