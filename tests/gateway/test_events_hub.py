"""The hub's two delivery paths: bounded queues, and sinks that receive a loop iteration's events at once."""

from __future__ import annotations

import asyncio

from gateway.events.hub import Batch, EndReason, Filter, Hub, Sink
from gateway.events.model import Event, EventKey, Kind


def recorder(into: list[list[EventKey]]) -> Sink:
    """A sink that records each call's keys and always keeps up."""

    def sink(events: list[Event]) -> bool:
        into.append([e.key for e in events])
        return True

    return sink


def message(block: int, index: int, type_: int = 1, project: bytes = b"") -> Event:
    return Event(Kind.MESSAGES, EventKey(block, index), block * 100 + index, type_, project, b"")


async def test_a_sink_gets_one_call_per_loop_iteration_with_every_matching_event() -> None:
    hub = Hub(Kind.MESSAGES, queue_size=4)
    hub.start_at(EventKey(0, 0))
    calls: list[list[EventKey]] = []
    sub = hub.subscribe(Filter(types=frozenset({1})))
    sub.sink = recorder(calls)
    for i in range(10):  # more than the queue holds: a sink has no queue limit of its own
        hub.publish(message(1, i, type_=1 if i % 2 == 0 else 2))
    assert calls == [] and sub.queue.empty()
    await asyncio.sleep(0)  # the flush runs on the next loop iteration
    assert calls == [[EventKey(1, i) for i in range(0, 10, 2)]]
    hub.publish(message(2, 0))
    await asyncio.sleep(0)
    assert calls[-1] == [EventKey(2, 0)] and len(calls) == 2
    assert sub.ended is None and len(hub) == 1


async def test_a_sink_that_falls_behind_is_ended_as_slow_and_others_continue() -> None:
    hub = Hub(Kind.MESSAGES, queue_size=4)
    hub.start_at(EventKey(0, 0))
    slow, fast = hub.subscribe(Filter()), hub.subscribe(Filter())
    slow.sink = lambda events: False
    got: list[list[EventKey]] = []
    fast.sink = recorder(got)
    hub.publish(message(1, 0))
    await asyncio.sleep(0)
    assert slow.ended is EndReason.SLOW and slow.queue.get_nowait() is None
    assert hub.dropped == 1 and len(hub) == 1
    hub.publish(message(1, 1))
    await asyncio.sleep(0)
    assert got == [[EventKey(1, 0)], [EventKey(1, 1)]]


async def test_unsubscribed_or_ended_sinks_receive_nothing_more() -> None:
    hub = Hub(Kind.MESSAGES, queue_size=4)
    hub.start_at(EventKey(0, 0))
    calls: list[list[EventKey]] = []
    a, b = hub.subscribe(Filter()), hub.subscribe(Filter())
    a.sink = b.sink = recorder(calls)
    hub.publish(message(1, 0))
    hub.unsubscribe(a)  # the client went away before the flush
    hub.close()  # and the hub shuts down: b is ended
    await asyncio.sleep(0)
    assert calls == [] and b.ended is EndReason.SHUTDOWN


async def test_queued_subscribers_still_get_a_bounded_queue() -> None:
    hub = Hub(Kind.MESSAGES, queue_size=3)
    hub.start_at(EventKey(0, 0))
    sub = hub.subscribe(Filter())
    for i in range(3):
        hub.publish(message(1, i))
    assert sub.queue.qsize() == 3 and sub.ended is None
    hub.publish(message(1, 3))
    assert sub.ended is EndReason.SLOW and hub.dropped == 1


async def test_sinks_owed_the_same_events_share_one_batch_and_its_bytes() -> None:
    """Encode once: one Batch (one bytes object) per filter and starting point, whatever the client count."""
    hub = Hub(Kind.MESSAGES, queue_size=4)
    hub.start_at(EventKey(0, 0))
    got: dict[str, list[Batch]] = {"a": [], "b": [], "late": [], "typed": []}

    def keep(name: str) -> Sink:
        def sink(events: Batch) -> bool:
            got[name].append(events)
            return True

        return sink

    a, b, late = hub.subscribe(Filter()), hub.subscribe(Filter()), hub.subscribe(Filter())
    typed = hub.subscribe(Filter(types=frozenset({2})))
    a.sink, b.sink, typed.sink = keep("a"), keep("b"), keep("typed")
    hub.publish(message(1, 0, type_=1))
    late.queue.get_nowait()  # `late` took its first event from its queue, then caught up
    late.sink = keep("late")
    hub.publish(message(1, 1, type_=2))
    hub.publish(message(1, 2, type_=1))
    await asyncio.sleep(0)
    (ba,), (bb,), (bl,), (bt,) = got["a"], got["b"], got["late"], got["typed"]
    assert ba is bb and [e.key for e in ba] == [EventKey(1, i) for i in range(3)]
    assert ba.frames is bb.frames and ba.chunks is bb.chunks  # built once, the same object for both
    assert [e.key for e in bl] == [EventKey(1, 1), EventKey(1, 2)] and bl is not ba
    assert [e.key for e in bt] == [EventKey(1, 1)]
    hub.unsubscribe(a)
    hub.unsubscribe(b)
    hub.publish(message(2, 0))
    await asyncio.sleep(0)
    assert len(got["a"]) == len(got["b"]) == 1 and [e.key for e in got["late"][-1]] == [EventKey(2, 0)]
