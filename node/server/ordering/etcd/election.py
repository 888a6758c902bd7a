"""Leader election with an etcd lease.

Each member holds a lease (TTL `ttl` seconds, refreshed every ttl/3) and
campaigns by creating the `leader` key attached to it, only if the key is
absent. The key disappears when the leader's lease expires (crash, partition,
lost quorum) or is revoked (clean stop), and the next campaign wins. A member
believes it leads only while its last successful keep-alive is younger than
the TTL; that belief only saves futile work: safety comes from the fenced
append (etcd_log), which compares the leader key's lease with the writer's.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

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

log = logging.getLogger("chain.election")


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
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.keys = keys
        self.node_id = node_id
        self.addr = addr
        self.ttl = ttl
        self.poll = poll
        self.clock = clock
        self.lease = 0
        self.leader: Leader | None = None
        self.changes = 0  # leaders seen elected (metric chain.etcd.leader_changes)
        self._lease_valid_until = 0.0
        self._last_keepalive = 0.0
        self._last_seen = 0.0  # when the leader key was last read (or written)
        self._stopping = asyncio.Event()
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

    async def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="election")

    async def stop(self) -> None:
        """Stop campaigning and give up leadership at once (revoking the lease deletes the leader key)."""
        self._stopping.set()
        if self._task is not None:
            await self._task
            self._task = None
        if self.lease:
            try:
                await self.client.revoke(self.lease)
            except Exception:  # the lease expires on its own anyway
                log.warning("could not revoke lease %x on stop", self.lease)
            self.lease = 0

    async def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                await self._round()
            except EtcdUnavailable as exc:
                log.warning("etcd unavailable: %s", exc)
            except Exception:  # a long-running loop never dies on one bad round
                log.exception("election round failed")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), self.poll)

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
        won = False
        if not kvs:
            value = json.dumps({"id": self.node_id, "addr": self.addr}).encode()
            result = await self.client.txn(
                [cmp_absent(self.keys.leader)],
                [op_put(self.keys.leader, value, self.lease)],
                [op_range(self.keys.leader)],
            )
            won = result.succeeded
            kvs = [] if won else result.ranges(0)
        self._last_seen = self.clock()
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
            log.info(
                "leader is %s at %s%s", leader.id, leader.addr, " (this node)" if leader.lease == self.lease else ""
            )
        self.leader = leader
