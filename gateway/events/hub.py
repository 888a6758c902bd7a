"""Fan-out: one feed per kind publishes events in key order; each client owns a bounded queue.

Publishing never waits. A subscription whose queue is full is ended (the client is told to resume with
its Last-Event-ID) and detached, so one slow or failing client never delays the others.

Every subscription records the hub's position when it was made (`boundary`): its queue receives every
matching event after that key, so a client that resumes from an older id reads history up to `boundary`
and then its queue, with no gap and no duplicate at the seam.

A subscription that has caught up (history sent, queue drained) may hand the hub a `sink`: from then on
its events skip the queue and the client's task. The hub collects what each sink is owed while it
publishes and hands it over once per loop iteration (`_flush`, scheduled with `call_soon`), so a burst of
events costs one call, and one socket write, per client. A sink answers False when its client is too far
behind (more than the queue size of events, or too many bytes, waiting in its connection's buffer), and the
hub ends that subscription as SLOW.

Encode once: subscriptions are grouped by filter, so a filter is evaluated once per event per distinct
filter (not per client), and the events a group's sinks are owed in one loop iteration are one `Batch`
shared by every sink of the group that became owed at the same point: its bytes (the SSE frames, or the
same as HTTP/1.1 chunks) are joined once and written as they are to every such client.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cached_property

from gateway.events.model import Event, EventKey, Kind

log = logging.getLogger(__name__)


class EndReason(StrEnum):
    SLOW = "slow"  # the client fell more than the queue size behind
    RESYNC = "resync"  # the feed found a gap in its source; the client resumes through history
    SHUTDOWN = "shutdown"


@dataclass(frozen=True)
class Filter:
    project: bytes = b""
    types: frozenset[int] = frozenset()

    def __call__(self, event: Event) -> bool:
        if self.types and event.type not in self.types:
            return False
        return not self.project or event.project == self.project


class Batch(list[Event]):
    """Events handed to sinks in one flush; shared by every sink owed the same events, so their bytes are
    built once (the first sink that asks) and written as they are to each client."""

    @cached_property
    def frames(self) -> bytes:
        return self[0].frame if len(self) == 1 else b"".join(e.frame for e in self)

    @cached_property
    def chunks(self) -> bytes:
        """The frames as HTTP/1.1 chunks, one per event (what each event's own `chunk` is)."""
        return self[0].chunk if len(self) == 1 else b"".join(e.chunk for e in self)


Sink = Callable[[Batch], bool]


@dataclass(eq=False)
class _Group:
    """The subscriptions with one filter, and the events published to its sinks since the last flush."""

    wants: Filter
    subs: dict[Subscription, None] = field(default_factory=dict)  # insertion-ordered set
    round: list[Event] = field(default_factory=list)


@dataclass(eq=False)
class Subscription:
    wants: Filter
    boundary: EventKey
    queue: asyncio.Queue[Event | None]
    ended: EndReason | None = None
    # Called when the subscription ends while its handler may be blocked writing to a stalled client.
    on_end: Callable[[EndReason], None] | None = field(default=None, repr=False)
    # Set by a caught-up client: its events go here instead of the queue (see the module doc).
    sink: Sink | None = field(default=None, repr=False)
    owed_from: int = field(default=-1, repr=False)  # index in its group's round of its first owed event

    def end(self, reason: EndReason) -> None:
        if self.ended is not None:
            return
        self.ended = reason
        self.queue.put_nowait(None)  # the slot kept free for this marker
        if self.on_end is not None:
            try:
                self.on_end(reason)
            except Exception:
                log.exception("ending an SSE subscription failed")


class Hub:
    def __init__(self, kind: Kind, queue_size: int) -> None:
        self.kind = kind
        self.queue_size = max(1, queue_size)
        self.position = EventKey(0, 0)  # key of the last event published (or the feed's starting point)
        self.ready = asyncio.Event()  # set once the feed knows its starting point
        self.closed = False
        self.dropped = 0
        self._groups: dict[Filter, _Group] = {}
        self._group_of: dict[Subscription, _Group] = {}
        self._owed: list[Subscription] = []  # subscriptions with a sink and events owed, in publish order
        self._rounds: list[_Group] = []  # groups with events in their round since the last flush

    def __len__(self) -> int:
        return len(self._group_of)

    def start_at(self, position: EventKey) -> None:
        self.position = position
        self.ready.set()

    def subscribe(self, wants: Filter) -> Subscription:
        if not self.ready.is_set():
            raise RuntimeError("the hub's feed has not started")
        sub = Subscription(wants, self.position, asyncio.Queue(maxsize=self.queue_size + 1))
        if self.closed:
            sub.end(EndReason.SHUTDOWN)
        else:
            group = self._groups.get(wants)
            if group is None:
                group = self._groups[wants] = _Group(wants)
            group.subs[sub] = None
            self._group_of[sub] = group
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        self._detach(sub)
        sub.sink = None  # its connection may be gone: nothing more is written to it

    def publish(self, event: Event) -> None:
        if event.key <= self.position:
            return  # already published (a feed that reconnected and replayed)
        self.position = event.key
        for group in list(self._groups.values()):
            if group.wants(event):
                self._publish_to(group, event)

    def _publish_to(self, group: _Group, event: Event) -> None:
        index = -1
        for sub in list(group.subs):
            if sub.sink is not None:
                if index < 0:
                    index = len(group.round)
                    group.round.append(event)
                    if index == 0:
                        if not self._rounds and not self._owed:
                            asyncio.get_running_loop().call_soon(self._flush)
                        self._rounds.append(group)
                if sub.owed_from < 0:
                    sub.owed_from = index
                    self._owed.append(sub)
                continue
            if sub.queue.qsize() >= self.queue_size:
                self._end(sub, EndReason.SLOW)
                self.dropped += 1
                continue
            sub.queue.put_nowait(event)

    def _flush(self) -> None:
        owed, self._owed = self._owed, []
        rounds, self._rounds = self._rounds, []
        batches: dict[tuple[int, int], Batch] = {}  # (id of a round, first index) -> the shared batch
        for sub in owed:
            start, sub.owed_from = sub.owed_from, -1
            group = self._group_of.get(sub)
            if group is None or sub.ended is not None or sub.sink is None:
                continue
            batch = batches.get((id(group.round), start))
            if batch is None:
                batch = batches[(id(group.round), start)] = Batch(group.round[start:])
            try:
                keeps_up = sub.sink(batch)
            except Exception:
                log.exception("an SSE sink failed; ending its stream")
                keeps_up = False
            if not keeps_up:
                self._end(sub, EndReason.SLOW)
                self.dropped += 1
        for group in rounds:
            group.round = []
            if not group.subs and self._groups.get(group.wants) is group:
                del self._groups[group.wants]

    def reset(self, position: EventKey) -> None:
        """The feed skipped events: end every subscription (clients resume through history) and move on."""
        self.position = position
        self._end_all(EndReason.RESYNC)

    def close(self) -> None:
        self.closed = True
        self.ready.set()  # wake requests waiting for the feed: they find the hub closed
        self._end_all(EndReason.SHUTDOWN)

    def _end_all(self, reason: EndReason) -> None:
        for sub in list(self._group_of):
            self._end(sub, reason)

    def _end(self, sub: Subscription, reason: EndReason) -> None:
        self._detach(sub)
        sub.end(reason)

    def _detach(self, sub: Subscription) -> None:
        group = self._group_of.pop(sub, None)
        if group is None:
            return
        group.subs.pop(sub, None)
        if not group.subs and not group.round:
            del self._groups[group.wants]
