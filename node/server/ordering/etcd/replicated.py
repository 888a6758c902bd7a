"""The `etcd` orderer: replicated nodes ordering blocks through a fenced log in etcd.

Every member runs one loop that owns its chain: it reads the log after its applied height when the log watch
(watch.py) says it moved, and once per resync interval anyway (every poll interval while the watch is not
live), applies each block in order (by the write set the leader wrote with it, or by executing it again:
`--verify-blocks`, applier.py; either way the state root is checked), and, when it is the elected leader
and has applied the whole log, builds the next block (sealing the oldest open block of its pending state,
whose messages were executed at admission: node/server/write/pending.py) and appends it with its write set
(node/state/writeset.py) in the fenced transaction (log.py). Only after the append succeeded does the leader
commit the block it built; if the append's answer is lost, the block is applied from the log like any other.
A block whose state root differs from ours (or whose write set is malformed) halts the member: it logs the
difference, stops taking writes (STATE_DIVERGED) and reports NOT_SERVING; reads keep working. A halted member,
and one whose store refuses commits (disk full), must not lead (`_unfit`): the election does not campaign for
it, and gives up the leader key if it holds it. A member the log was compacted past while it ran (its lease
had lapsed: a long pause, a partition from etcd) cannot catch up from the log: it leaves (`on_leave`; the node
drains and exits with RESTART_EXIT_STATUS) so that its next start state-syncs from a snapshot a live member
serves (join.py), instead of waiting for an operator.

Followers forward accepted submissions to the leader (forwarding.py), which
does not verify again what a member proves it verified (membership.py). With
no leader (election under way, etcd without quorum) submissions get
UNAVAILABLE (NOT_LEADER) with a retry hint.

A maintenance task publishes this member's applied height and the newest
snapshot it serves to joining members (both attached to its lease, so only
live members count), re-forwards long-pending messages, and, on the leader,
compacts the log below the oldest of the snapshots live members serve (and
below every live member's applied height): whichever single member is left
serving, a joining member can state-sync from it and replay the log after.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from chain.v1 import message_pb2 as pb
from node.chain import Chain
from node.errors import ChainError, InvariantBroken, MessageRejected, Reason
from node.observability.logs import Every
from node.server.ordering.applier import BlockApplier
from node.server.ordering.cadence import BlockCadence
from node.server.ordering.etcd.client import EtcdClient, EtcdFull, EtcdUnavailable, op_delete, prefix_end
from node.server.ordering.etcd.election import UNAVAILABLE_LOG_EVERY, Election
from node.server.ordering.etcd.formats import (
    WITH_WRITE_SET,
    BlockOnlyLog,
    Verdict,
    advertised,
    decide,
    parse_records,
    switched,
)
from node.server.ordering.etcd.join import served_snapshots, snapshot_doc
from node.server.ordering.etcd.log import BlockLog, Keys
from node.server.ordering.etcd.readindex import Coalesced
from node.server.ordering.etcd.watch import KeyWatch
from node.server.ordering.state import SERVING, MemberState, MemberStatus, Pacing, Say, Wait, after, current, wait_after
from node.server.snapshots import SnapshotManager
from node.server.write.forwarding import Forwarder, no_leader, stopping
from node.server.write.mempool import Mempool
from node.server.write.pipeline import Outcome
from node.state.writeset import encode_write_set

log = logging.getLogger("chain.replicated")
PUBLISH_WAIT = 5.0  # how long a finished snapshot job waits for its listing in etcd (then the tick retries)


@dataclass(frozen=True)
class ReplicationSettings:
    node_id: str
    lease_ttl: int = 3
    poll_interval: float = 0.05  # how often the log is read while the watch is not live, or not caught up
    resync_interval: float = 1.0  # how often it is read anyway while the watch is live
    block_interval: float = 0.2
    empty_block_interval: float = 5.0
    max_lag_blocks: int = 10
    maintenance_interval: float = 1.0
    compact_interval: float = 30.0
    fetch_limit: int = 64


class ReplicatedOrderer:
    def __init__(
        self,
        chain: Chain,
        mempool: Mempool,
        applier: BlockApplier,
        forwarder: Forwarder,
        snapshots: SnapshotManager,
        client: EtcdClient,
        keys: Keys,
        settings: ReplicationSettings,
        *,
        part_bytes: int,
        clock: Callable[[], float] = time.time,
        on_leave: Callable[[str], None] = lambda why: None,
    ) -> None:
        self.chain = chain
        self.mempool = mempool
        self.applier = applier
        self.forwarder = forwarder
        self.snapshots = snapshots
        self.client = client
        self.keys = keys
        self.settings = settings
        self.clock = clock
        self.reads = advertised(os.environ)  # the log-entry formats this member reads (formats.py)
        self.log = (BlockLog if WITH_WRITE_SET in self.reads else BlockOnlyLog)(client, keys, part_bytes=part_bytes)
        self._formats: Verdict | None = None  # the leader's last verdict on what it writes (None: not read)
        self.addr = ""  # the advertised gRPC address; set by the app once its listener is bound
        self.election: Election | None = None
        self._held = SERVING  # HALTED, LEAVING (both final) or LOG_FULL, and why (state.py)
        self._log_full_since = 0.0
        self.on_leave = on_leave  # the app drains and exits, and the next start state-syncs
        self._next = 0  # the log's next number as last read (0: not read yet)
        self._height = chain.height
        self._building = 0
        self.cadence = BlockCadence(settings.block_interval, settings.empty_block_interval, clock)
        self._stopping = asyncio.Event()
        self._wake = asyncio.Event()  # the log moved (the watch), or stop
        self.watch = KeyWatch(client, keys.next, self._wake, what="log")
        self._read_index = Coalesced(self._log_height)  # linearizable reads share etcd round trips
        self._tasks: list[asyncio.Task[None]] = []
        self._published_snapshot: tuple[str, int] = ("", 0)  # (snapshot name, lease) as last published
        self._published_member: tuple[int, str, int] = (0, "", 0)  # (applied, addr, lease) as last put
        self._member_put_at = 0.0
        self._publishing = asyncio.Lock()  # one listing write at a time: an older one never lands last
        self._loop: asyncio.AbstractEventLoop | None = None
        self._last_compaction = 0.0

    # ---- the Orderer interface ----
    @property
    def role(self) -> str:
        return "leader" if self.election is not None and self.election.is_leader else "follower"

    @property
    def leader(self) -> str:
        current = self.election.current if self.election is not None else None
        return current.addr if current is not None else ""

    @property
    def log_height(self) -> int:
        return max(self._next - 1, 0)

    async def read_index(self) -> int:
        """The log's height read from etcd after this call (`next` - 1; etcd answers a range linearizably unless
        asked otherwise, as its ReadIndex does): every block any member has committed is at or below it (a
        leader commits a block only after appending it). Concurrent calls share one etcd read sent after they
        all arrived (readindex.py). EtcdUnavailable when etcd does not answer."""
        return await self._read_index()

    async def _log_height(self) -> int:
        kv = await self.client.get(self.keys.next)
        return int(kv.value) - 1 if kv is not None else self.chain.height  # no log yet: nothing ordered beyond

    @property
    def pending_blocks(self) -> int:
        return max(self._building, self.log_height - self._height)

    @property
    def member_status(self) -> MemberStatus:
        """This member's state (state.py): what health, the election's `unfit` and `submit` read."""
        return current(self._held, self.applier.storage, self._behind())

    def _behind(self) -> str:
        if self._next == 0:
            return "the log has not been read yet"
        lag, most = self.log_height - self._height, self.settings.max_lag_blocks
        return f"{lag} blocks behind the log (more than {most})" if lag > most else ""

    @property
    def serving(self) -> bool:
        """Healthy: not halted nor leaving, the log has been read, and no more than max_lag_blocks behind it."""
        return self.member_status.state.serving

    @property
    def blocks_from_pending(self) -> int:
        return self.cadence.blocks_from_pending

    @property
    def blocks_executed_again(self) -> int:
        return self.cadence.blocks_executed_again

    async def submit(self, msgs: Sequence[pb.Message], *, vouched: bool = False) -> list[Outcome]:
        assert self.election is not None
        if self._stopping.is_set():  # its election is ending: forwarding now would reach itself or nobody
            raise stopping()
        status, leader = self.member_status, self.election.current
        leads = leader is not None and self.election.is_leader
        # halted: STATE_DIVERGED; leaving: DRAINING; a failing store: STORAGE_FAILED where this member would
        # admit (it leads, or none does: it cannot lead while its store fails, so say that, not "no leader")
        refused = status.refusal(admits=leader is None or leads, storage=self.applier.storage)
        if refused is not None:
            raise refused
        if leader is None:
            if isinstance(self.election.failure, EtcdFull):  # no campaign can be written: say why
                raise self._full(str(self.election.failure))
            raise no_leader("no leader is elected")
        if leads:
            if status.state is MemberState.LOG_FULL:  # what was admitted before stays and commits after
                raise self._full(status.reason)
            return await self.applier.pipeline.submit(msgs, vouched=vouched)
        if leader.id == self.settings.node_id:  # its own key, its lease lapsed: never forward to itself
            raise no_leader("this member's leadership lapsed and no other leader is known yet")
        return await self.forwarder.submit(msgs, leader.addr, vouched=vouched)

    async def start(self) -> None:
        if not self.addr:
            raise InvariantBroken("the replicated orderer needs the node's advertised address before start")
        s = self.settings
        self.election = Election(
            self.client,
            self.keys,
            s.node_id,
            self.addr,
            ttl=s.lease_ttl,
            poll=min(0.25, s.lease_ttl / 6),
            unfit=self._unfit,
        )
        await self.election.start()
        self._loop = asyncio.get_running_loop()
        self.snapshots.listen(self._snapshots_changed)
        self.watch.start()
        self._tasks = [
            asyncio.create_task(self._run(), name="replicated-orderer"),
            asyncio.create_task(self._maintain(), name="replicated-maintenance"),
        ]

    async def stop(self) -> None:
        self._stopping.set()
        self._wake.set()
        for task in self._tasks:
            await task
        self._tasks = []
        await self.watch.stop()
        if self.election is not None:
            await self.election.stop()
        await self.forwarder.close()
        await self.client.close()

    # ---- the loop that owns the chain ----
    async def _run(self) -> None:
        unavailable = Every(UNAVAILABLE_LOG_EVERY)
        while not self._stopping.is_set():
            woken = self._wake.is_set()
            self._wake.clear()  # before the read: an append after it wakes the next round
            live = self.watch.live
            wait = Wait(self.settings.resync_interval if live else self.settings.poll_interval)
            try:
                wait = Wait(await self._round(live, woken, wait.seconds))
            except Exception as exc:  # a long-running loop never dies on one bad round
                wait = wait_after(exc, Pacing(wait.seconds, self.settings.poll_interval, self._store_retry()))
                self._failed(exc, wait, unavailable)
            with contextlib.suppress(TimeoutError):  # after a failure (backoff): wait it out even if woken
                await asyncio.wait_for((self._stopping if wait.backoff else self._wake).wait(), wait.seconds)

    async def _round(self, live: bool, woken: bool, wait: float) -> float:
        """Read and apply the log; on the leader, once caught up, cut the next block when it is due. Returns
        how long to wait for the next round (at most `wait`)."""
        assert self.election is not None
        if self.election.lease and self.election.lease != self._published_snapshot[1]:
            with contextlib.suppress(EtcdFull):  # a full etcd refuses the listing, not the catching up
                await self._publish_snapshot()  # a new lease: list our snapshot now, not a tick later
        known = self._next
        caught_up = not self._held.state.final and await self._catch_up()
        if live and not woken and not self._wake.is_set() and known and self._next > known:
            log.info("the log moved without a word from the watch; opening it again")
            await self.watch.restart()
        if not caught_up:
            return min(wait, self.settings.poll_interval)  # more to read, or the log is not there yet
        if self.election.is_leader:
            return min(wait, await self.cadence.tick(len(self.mempool), self._produce))
        return wait

    def _store_retry(self) -> float:
        return self.applier.storage.retry_after_ms / 1000

    def _failed(self, exc: Exception, wait: Wait, unavailable: Every) -> None:
        """Take the state a failed round sets and log it (called in the `except` block)."""
        if wait.status is not None and wait.status.state is MemberState.HALTED:
            self._halt(wait.status.reason)
        elif wait.status is not None and wait.status.state is MemberState.LOG_FULL:
            self._refused_by_log(wait.status)
        if wait.reconsider and self.election is not None:
            self.election.reconsider()  # e.g. a leader that cannot commit gives up leadership now
        if wait.say is Say.UNREACHABLE and unavailable.due():
            log.warning("etcd unavailable; retrying: %s", exc)
        elif wait.say is Say.TRACEBACK:
            log.exception("replication round failed; retrying")

    def _refused_by_log(self, status: MemberStatus) -> None:
        if self._held.state is not MemberState.LOG_FULL and not self._held.state.final:
            self._log_full_since = time.monotonic()
            log.error(
                "ETCD FULL: no block can be appended (%s); refusing submissions with STORAGE_FAILED until etcd "
                "takes appends again: free space, defragment, disarm the alarm "
                "(docs/operations.md, EtcdDatabaseNearQuota)",
                status.reason,
            )
        self._held = after(self._held, status)

    def _appended(self) -> None:
        if self._held.state is MemberState.LOG_FULL:
            waited = time.monotonic() - self._log_full_since
            log.warning("etcd takes appends again after %.1f s; submissions are admitted", waited)
        self._held = after(self._held, SERVING)

    def _full(self, why: str) -> MessageRejected:
        return MessageRejected(
            Reason.STORAGE_FAILED,
            f"the cluster cannot append blocks ({why}); try again later",
            retry_after_ms=max(1000, int(self.settings.empty_block_interval * 1000)),
        )

    def _halt(self, why: str) -> None:
        if not self._held.state.final:
            log.critical("this node stops taking writes: %s", why)
        self._held = after(self._held, MemberStatus(MemberState.HALTED, why))
        if self.election is not None:
            self.election.reconsider()  # a halted member must not lead

    def _leave(self, why: str) -> None:
        """The log no longer holds the blocks after ours: only a state sync, at the next start, brings this
        member back. Stop taking writes and leading, and ask the app to drain and exit."""
        if self._held.state.final:
            return
        log.critical("this node restarts to state-sync from a member's snapshot: %s", why)
        self._held = MemberStatus(MemberState.LEAVING, why)
        if self.election is not None:
            self.election.reconsider()
        self.on_leave(why)

    def _unfit(self) -> str:
        """Why this member must not lead ("" when it may): the election asks before each campaign, and a
        leader that turns unfit gives up its key (election.py). Halted, leaving, or its store backing off
        (state.py). A failing store counts only until its next attempt is due: a member with nothing left in
        the log to retry (a one-member cluster, every member failing, a failure before the append) would
        otherwise never lead, nor commit, again. Once due it may campaign, but healthy members take a free
        key first (they campaign when the watch reports it)."""
        return self.member_status.unfit()

    async def _catch_up(self) -> bool:
        """Apply what the log holds after our height; True when nothing is left to apply."""
        tail = await self.log.tail(self._height, self.settings.fetch_limit)
        self._next = tail.next_number
        if tail.next_number == 0:  # a log never written: the first leader seeds it at its height
            assert self.election is not None
            if self.election.is_leader:
                await self.log.seed(self._height + 1)
            return False
        if tail.first and tail.first > self._height + 1:
            self._leave(f"the log starts at block {tail.first} but this node is at {self._height}")
            return False
        if tail.next_number <= self._height:
            self._halt(f"this node is at block {self._height} but the log ends at {tail.next_number - 1}")
            return False
        entries = []
        for i, (number, value) in enumerate(tail.entries):
            if number != self._height + 1 + i:
                raise InvariantBroken(f"the log skips from {self._height + i} to {number}")
            entries.append(await self.log.entry(number, value))
        blocks, write_sets = [e.block for e in entries], [e.write_set for e in entries]
        await self.applier.apply_run(blocks, self._applied, write_sets)  # the pending state moves on once, at the end
        return self._height + 1 == self._next

    def _applied(self, number: int) -> None:
        self._height = number
        self.cadence.committed()
        self._appended()  # the log moved: etcd takes appends again (another member led meanwhile)

    async def _produce(self) -> None:
        assert self.election is not None
        lease = self.election.lease
        self._building = 1
        record = self.applier.pipeline.telemetry.block("local")  # span and metrics (node/server/telemetry/spans.py)
        try:
            write_sets = await self._write_sets()
            now_ms = int(self.clock() * 1000)
            with self.applier.storage.counting():  # the writer that runs the tree update may be lost twice
                out, sealed = await self.applier.pipeline.next_block(now_ms)  # sealed: executed once
            self.cadence.built(sealed)
            record.built()
            number = int(out.block.header.number)
            if not await self.log.append(out.block, lease, encode_write_set(out.writes) if write_sets else None):
                log.info("append of block %d refused (leadership lost or the log moved on)", number)
                return
            self._appended()
            await self.applier.commit(out, record)
        finally:
            self._building = 0
        self._height = number
        self._next = number + 1
        self.cadence.committed()
        log.debug("block %d appended: %d messages (%d dropped)", number, len(out.applied), len(out.dropped))

    async def _write_sets(self) -> bool:
        """Whether the next entry carries its write set: the verdict of the last maintenance round, or, before
        the first one since this member leads, read now."""
        if self._formats is None:
            await self._check_formats()
        assert self._formats is not None
        return self._formats.write_sets

    async def _check_formats(self) -> None:
        """Read the live member records and decide what the leader writes (formats.py): `W` entries only while
        every one lists `W`. Logged when the verdict changes (and when the first one is `B`)."""
        prefix = self.keys.member_prefix
        kvs = await self.client.range(prefix, prefix_end(prefix))
        me = self.settings.node_id
        records = [r for r in parse_records(((kv.key, kv.value) for kv in kvs), prefix) if r[0] != me]
        verdict = decide([*records, (me, {"reads": list(self.reads)})])  # this member, published or not yet
        before, self._formats = self._formats, verdict
        if not switched(before, verdict):
            return
        what = "the block and its write set" if verdict.write_sets else "the block alone: members execute it again"
        log.warning("the leader writes %s log entries (%s): %s", verdict.format, what, verdict.why())

    # ---- maintenance ----
    async def _maintain(self) -> None:
        while not self._stopping.is_set():
            try:
                await asyncio.wait_for(self._stopping.wait(), self.settings.maintenance_interval)
                return
            except TimeoutError:
                pass
            try:
                await self._maintenance_round()
            except (EtcdUnavailable, ChainError) as exc:
                log.debug("maintenance skipped: %s", exc)
            except Exception:
                log.exception("maintenance round failed")

    async def _maintenance_round(self) -> None:
        assert self.election is not None
        try:
            await self._publish_member()
            await self._publish_snapshot()
        except EtcdFull as exc:  # puts are refused, deletes are not: the leader's compaction below still runs
            log.debug("listing skipped: %s", exc)
        current = self.election.current
        if current is not None and not self.election.is_leader:
            await self.forwarder.reforward(current.addr)
        if self.election.is_leader:
            await self._check_formats()
        else:
            self._formats = None  # read again on leading: members may have changed meanwhile
        if self.election.is_leader and time.monotonic() - self._last_compaction >= self.settings.compact_interval:
            self._last_compaction = time.monotonic()
            await self.compact()

    async def _publish_member(self) -> None:
        """`member/<id>`: this member's applied height and address, attached to its lease. Put when either or
        the lease changed, and again once a compaction interval even when not (a record lost some other way,
        an etcd restored from a backup say, is back within that). An idle member writes nothing else, so an
        idle cluster's raft log stands still instead of taking a proposal a member a second."""
        assert self.election is not None
        lease = self.election.lease
        if not lease:
            return
        record = (self._height, self.addr, lease)
        fresh = time.monotonic() - self._member_put_at < self.settings.compact_interval
        if record == self._published_member and fresh:
            return
        doc = {"applied": self._height, "addr": self.addr, "reads": list(self.reads)}
        await self.client.put(self.keys.member(self.settings.node_id), json.dumps(doc).encode(), lease=lease)
        self._published_member, self._member_put_at = record, time.monotonic()

    async def _publish_snapshot(self) -> None:
        """`snapshot/<id>`: the newest snapshot this member serves, attached to its lease (gone with it)."""
        assert self.election is not None
        async with self._publishing:
            lease = self.election.lease
            latest = self.snapshots.latest()
            name = latest.name if latest is not None else ""
            if not lease or (name, lease) == self._published_snapshot:
                return
            key = self.keys.snapshot(self.settings.node_id)
            if latest is None:
                await self.client.txn([], [op_delete(key)])
            else:
                await self.client.put(key, snapshot_doc(int(latest.block_number), name, self.addr), lease=lease)
            self._published_snapshot = (name, lease)

    def _snapshots_changed(self) -> None:
        """A snapshot was taken or deleted (called in the thread that did it): list the change in etcd before
        that thread goes on, so a snapshot job reported finished is already what joining members see. If etcd
        cannot be reached the maintenance tick lists it later."""
        loop = self._loop
        if loop is None or loop.is_closed() or self._stopping.is_set():
            return
        with contextlib.suppress(RuntimeError):
            if asyncio.get_running_loop() is loop:  # on the loop itself: it cannot wait for its own task
                self._tasks.append(loop.create_task(self._publish_quietly()))
                return
        try:
            asyncio.run_coroutine_threadsafe(self._publish_quietly(), loop).result(PUBLISH_WAIT)
        except TimeoutError:
            log.warning("listing the snapshot change in etcd takes long; the job goes on without waiting")

    async def _publish_quietly(self) -> None:
        try:
            await self._publish_snapshot()
        except Exception as exc:  # the tick retries; the snapshot itself is fine
            log.warning("could not list the snapshot change in etcd yet (the next maintenance tick retries): %s", exc)

    async def compact(self) -> int:
        """Delete log entries below the oldest snapshot a live member serves, never above a live member's
        applied height: a joining member can state-sync from any one serving member and replay from there."""
        served = await served_snapshots(self.client, self.keys)
        if not served:
            return 0
        floor = min(p.block_number for p in served)
        members = await self.client.range(self.keys.member_prefix, prefix_end(self.keys.member_prefix))
        for kv in members:
            floor = min(floor, int(json.loads(kv.value)["applied"]))
        floor = min(floor, self._height)
        if floor <= 1:
            return 0
        revision = await self.log.compact_below(floor)
        try:
            await self.client.compact(revision)
        except (EtcdUnavailable, ChainError) as exc:  # already compacted at or past this revision
            log.debug("etcd history compaction skipped: %s", exc)
        log.info("log compacted below block %d", floor)
        return floor
