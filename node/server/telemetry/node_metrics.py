"""The node's metric instruments (OpenTelemetry names; Prometheus names in docs/observability.md).

Recorded as things happen: RPC durations and outcomes (rpc.py), message outcomes at submission, block
interval, messages per block, apply time, submit -> commit time per message (spans.py). Observed at
scrape time from the node's own objects: mempool size, block height, stream subscribers and the ones
dropped, etcd leader changes, whether this member diverged, the calls each read worker answered and the
read workers started again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sized
from typing import Protocol

from opentelemetry.metrics import CallbackOptions, Observation

from node.observability.metrics import MetricsEndpoint, memo_lookups
from node.server.ordering.state import MemberState, MemberStatus

SECONDS_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
INTERVAL_BUCKETS = (0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.5, 0.75, 1.0, 2.0, 5.0, 10.0, 30.0)
COUNT_BUCKETS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000)
MS_BUCKETS = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000)


class ObservedHub(Protocol):
    """The event hub as the gauges read it: open subscribers and the ones dropped."""

    dropped_subscribers: int

    def __len__(self) -> int: ...


class ObservedReaders(Protocol):
    """The read workers as the counters read them (node/server/readers/supervisor.py's ReadWorkers fits it)."""

    @property
    def calls(self) -> Mapping[int, int]: ...

    @property
    def restarts(self) -> int: ...

    @property
    def answer_lookups(self) -> Mapping[int, tuple[int, int]]: ...

    @property
    def answer_bytes(self) -> Mapping[int, int]: ...


class ObservedStorage(Protocol):
    """Whether block commits fail (node/server/storage_health.py's StorageHealth fits it)."""

    @property
    def ok(self) -> bool: ...

    @property
    def failures_total(self) -> int: ...


class ObservedNode(Protocol):
    """What the scrape-time gauges read from the running node (the servicer's NodeState fits it).

    A protocol rather than NodeState itself, so the instruments do not import the RPC layer they measure.
    """

    @property
    def mempool(self) -> Sized: ...

    @property
    def hub(self) -> ObservedHub: ...

    @property
    def orderer(self) -> object: ...


class NodeMetrics:
    def __init__(self, endpoint: MetricsEndpoint) -> None:
        self.meter = meter = endpoint.meter
        # the newest committed block, kept here as blocks commit (scrapes run on the HTTP server's thread
        # and must not read the store)
        self.height = 0
        # recorded on every call: the lean histogram, not an OpenTelemetry one (node/observability/histogram.py)
        self.rpc_duration = endpoint.histogram(
            "rpc.server.duration", "ms", "Duration of inbound gRPC calls, by method, status and reason code", MS_BUCKETS
        )
        self.messages_submitted = meter.create_counter(
            "chain.messages.submitted",
            unit="{message}",
            description="Messages submitted, by outcome (accepted / rejected) and reason code",
        )
        self.messages_committed = meter.create_counter(
            "chain.messages.committed", unit="{message}", description="Messages committed in blocks"
        )
        self.messages_dropped = meter.create_counter(
            "chain.messages.dropped",
            unit="{message}",
            description="Pending messages left out of a block because they no longer applied, by reason code",
        )
        self.blocks = meter.create_counter(
            "chain.blocks.committed", unit="{block}", description="Blocks committed, by source (local / log)"
        )
        self.block_interval = meter.create_histogram(
            "chain.block.interval",
            unit="s",
            description="Time between the timestamps of consecutive blocks",
            explicit_bucket_boundaries_advisory=INTERVAL_BUCKETS,
        )
        self.block_messages = meter.create_histogram(
            "chain.block.messages",
            unit="{message}",
            description="Messages per block",
            explicit_bucket_boundaries_advisory=COUNT_BUCKETS,
        )
        self.block_apply = meter.create_histogram(
            "chain.block.apply.duration",
            unit="s",
            description="Time to build (or re-execute) a block and commit it to the store",
            explicit_bucket_boundaries_advisory=SECONDS_BUCKETS,
        )
        # one record per committed message: the lean histogram too
        self.commit_latency = endpoint.histogram(
            "chain.message.commit.duration",
            "s",
            "Time from a message's acceptance into the mempool until its block is committed",
            SECONDS_BUCKETS,
        )

    def observe(self, state: Callable[[], ObservedNode | None]) -> None:
        """Gauges read from the node's objects at scrape time (`state()` is None before the node started)."""

        def gauge(
            read: Callable[[ObservedNode], Iterable[Observation]],
        ) -> Callable[[CallbackOptions], list[Observation]]:
            def callback(_options: CallbackOptions) -> list[Observation]:
                node = state()
                return [] if node is None else list(read(node))

            return callback

        self.meter.create_observable_gauge(
            "chain.mempool.size",
            [gauge(lambda n: [Observation(len(n.mempool))])],
            unit="{message}",
            description="Messages waiting in the mempool",
        )
        self.meter.create_observable_gauge(
            "chain.block.height",
            [gauge(lambda n: [Observation(self.height)])],
            unit="{block}",
            description="Number of the newest committed block",
        )
        self.meter.create_observable_up_down_counter(
            "chain.stream.subscribers",
            [gauge(lambda n: [Observation(len(n.hub))])],
            unit="{subscriber}",
            description="Open SubscribeMessages / SubscribeBlocks streams",
        )
        self.meter.create_observable_counter(
            "chain.stream.subscribers.dropped",
            [gauge(lambda n: [Observation(n.hub.dropped_subscribers)])],
            unit="{subscriber}",
            description="Stream subscribers dropped for falling behind (SLOW_SUBSCRIBER)",
        )
        self.meter.create_observable_gauge(
            "chain.member.diverged",
            [gauge(_diverged)],
            unit="{state}",
            description="1 while this member refuses writes after a block whose state root differs (STATE_DIVERGED)",
        )
        self.meter.create_observable_gauge(
            "chain.member.state",
            [gauge(_member_state)],
            unit="{state}",
            description="1 for the state this member is in (HALTED ... SERVING: docs/replication.md), 0 for the others",
        )
        self.meter.create_observable_gauge(
            "chain.etcd.no_space",
            [gauge(_no_space)],
            unit="{state}",
            description="1 while etcd refuses this leader's appends with its NOSPACE alarm (writes: STORAGE_FAILED)",
        )
        self.meter.create_observable_counter(
            "chain.etcd.leader_changes",
            [gauge(_leader_changes)],
            unit="{change}",
            description="Leaders this member has seen elected (etcd orderer; 0 otherwise)",
        )

    def observe_storage(self, storage: ObservedStorage) -> None:
        """Whether block commits fail now, and how many have failed (node/server/storage_health.py)."""
        self.meter.create_observable_gauge(
            "chain.storage.failed",
            [lambda _o: [Observation(0 if storage.ok else 1)]],
            unit="{state}",
            description="1 while the node cannot commit blocks (disk full, I/O error) and refuses submissions",
        )
        self.meter.create_observable_counter(
            "chain.storage.failures",
            [lambda _o: [Observation(storage.failures_total)]],
            unit="{attempt}",
            description="Block commits the store refused (each retry counts)",
        )

    def observe_read_workers(self, readers: ObservedReaders) -> None:
        """Calls each read worker answered itself, workers started again after an exit (`--read-workers`), and
        each worker's kept answers: lookups by hit or miss, bytes (`--read-answer-bytes`)."""
        self.meter.create_observable_counter(
            "chain.read_worker.calls",
            [lambda _o: [Observation(n, {"chain.read_worker": str(i)}) for i, n in sorted(readers.calls.items())]],
            unit="{call}",
            description="Calls a read worker answered itself, by worker (calls it relayed count on the main process)",
        )
        self.meter.create_observable_counter(
            "chain.read_worker.restarts",
            [lambda _o: [Observation(readers.restarts)]],
            unit="{restart}",
            description="Read workers started again after one exited while the node ran (crash, kill, OOM)",
        )
        self.meter.create_observable_counter(
            "chain.read_worker.answers",
            [lambda _o: _answer_lookups(readers)],
            unit="{lookup}",
            description="Reads a worker answered from its kept answers (hit) or read from the store (miss)",
        )
        self.meter.create_observable_gauge(
            "chain.read_worker.answers.size",
            [lambda _o: [Observation(n, {"chain.read_worker": str(i)}) for i, n in readers.answer_bytes.items()]],
            unit="By",
            description="Bytes of answers a read worker keeps for the current snapshot and older ones",
        )


def _answer_lookups(readers: ObservedReaders) -> list[Observation]:
    lookups = sorted(readers.answer_lookups.items())
    return [o for i, (hits, misses) in lookups for o in memo_lookups(hits, misses, {"chain.read_worker": str(i)})]


def _in_state(node: ObservedNode, state: MemberState) -> list[Observation]:
    status = getattr(node.orderer, "member_status", None)
    return [Observation(1 if isinstance(status, MemberStatus) and status.state is state else 0)]


def _member_state(node: ObservedNode) -> list[Observation]:
    status = getattr(node.orderer, "member_status", None)
    now = status.state if isinstance(status, MemberStatus) else None
    return [Observation(int(state is now), {"chain.member.state": state.name}) for state in MemberState]


def _diverged(node: ObservedNode) -> list[Observation]:
    """HALTED: a block's state root was not this member's (node/server/ordering/state.py)."""
    return _in_state(node, MemberState.HALTED)


def _no_space(node: ObservedNode) -> list[Observation]:
    """LOG_FULL: etcd refuses this member's appends (its database over its quota)."""
    return _in_state(node, MemberState.LOG_FULL)


def _leader_changes(node: ObservedNode) -> list[Observation]:
    election = getattr(node.orderer, "election", None)
    return [Observation(int(getattr(election, "changes", 0)))]
