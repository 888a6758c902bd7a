"""The node's own spans and block metrics: submit -> verify / validate / mempool, and the block.

A submission (SubmitMessage, BatchSubmitMessages, or a forwarded batch) is one `chain.submit` span, a
child of the gRPC server span, with three children in order: `chain.verify` (hash and signatures, the
whole batch), `chain.validate` (the state transition against committed state plus pending effects,
message by message) and `chain.mempool` (admission). Each accepted message enters the mempool with an
`Admission`: when it was accepted and the context of its `chain.submit` span.

A block is a `chain.block` span of its own trace (it commits messages from many requests), with
children `chain.block.build` and `chain.block.commit`, and one link per distinct submit span among the
messages it commits (link attribute `chain.messages`: how many of that submission's messages it holds).
So a trace viewer goes from a submission to the block that committed it, and the metric
`chain.message.commit.duration` has the submit -> commit time of every message.

With tracing off there is no tracer: every stage is a shared null context and no span context is read.
"""

from __future__ import annotations

import contextlib
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from opentelemetry import trace
from opentelemetry.trace import Span, SpanContext, Tracer, TracerProvider

from chain.v1 import message_pb2 as pb
from node.server.telemetry.node_metrics import NodeMetrics

if TYPE_CHECKING:
    from node.state.transition import BlockOutput

_OFF: contextlib.nullcontext[None] = contextlib.nullcontext()


class Verdict(Protocol):
    """What a submission answered for one message (node.server.write.pipeline.Outcome)."""

    @property
    def accepted(self) -> bool: ...

    @property
    def reason(self) -> str: ...


@dataclass(frozen=True, slots=True)
class Admission:
    at: float  # monotonic seconds when the message was accepted into the mempool
    span: SpanContext | None  # its chain.submit span, when tracing


class NodeTelemetry:
    def __init__(
        self,
        tracer_provider: TracerProvider | None = None,
        metrics: NodeMetrics | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.tracer: Tracer | None = tracer_provider.get_tracer("chain.node") if tracer_provider else None
        self.metrics = metrics
        self.clock = clock
        self.last_block_ms = 0  # timestamp of the previous block seen, for the block interval

    @property
    def on(self) -> bool:
        return self.tracer is not None or self.metrics is not None

    def stage(self, name: str, **attributes: Any) -> contextlib.AbstractContextManager[Span | None]:
        """A span around one stage of a submission (the current span while it runs); a null context when off."""
        if self.tracer is None:
            return _OFF
        return self.tracer.start_as_current_span(name, attributes=attributes)

    def admission(self) -> Admission | None:
        """What a message accepted now carries into the mempool (call it inside the chain.submit span)."""
        if not self.on:
            return None
        span: SpanContext | None = None
        if self.tracer is not None:
            context = trace.get_current_span().get_span_context()
            span = context if context.is_valid and context.trace_flags.sampled else None
        return Admission(self.clock(), span)

    def submitted(self, msgs: Sequence[pb.Message], outcomes: Sequence[Verdict]) -> None:
        """Count each message's outcome (accepted, or rejected with its reason code) by message type."""
        if self.metrics is None:
            return
        counts = Counter((o.accepted, o.reason, msg.data.type) for msg, o in zip(msgs, outcomes, strict=True))
        for (accepted, reason, number), n in counts.items():  # the type's name once per distinct count
            try:
                kind = pb.MessageType.Name(number)
            except ValueError:  # a retired or unknown type number (rejected, but still counted)
                kind = "UNKNOWN"
            attributes = {
                "chain.outcome": "accepted" if accepted else "rejected",
                "chain.reason_code": reason,
                "chain.message.type": kind.removeprefix("MESSAGE_TYPE_"),
            }
            self.metrics.messages_submitted.add(n, attributes)

    def block(self, source: str) -> BlockRecorder:
        """Start recording a block: `source` is "local" (built here), "log" (ordered elsewhere, re-executed) or
        "writeset" (ordered elsewhere, applied by its leader's write set)."""
        return BlockRecorder(self, source)


class BlockRecorder:
    """One block's span and metrics: created before building, `built()` after, `committed()` after commit
    (before its messages leave the mempool, whose admissions it reads)."""

    def __init__(self, telemetry: NodeTelemetry, source: str) -> None:
        self.telemetry = telemetry
        self.source = source
        self.start_ns = time.time_ns()
        self.start = time.perf_counter()
        self.built_at: float | None = None

    def built(self) -> None:
        self.built_at = time.perf_counter()

    def committed(self, out: BlockOutput, admissions: Callable[[Sequence[bytes]], list[Admission | None]]) -> None:
        t = self.telemetry
        if not t.on:
            return
        end = time.perf_counter()
        built = self.built_at or self.start
        header = out.block.header
        hashes = [bytes(r.message.hash) for r in out.applied]
        admitted = admissions(hashes)
        m = t.metrics
        if m is not None:
            m.height = max(m.height, int(header.number))
            attrs = {"chain.block.source": self.source}
            m.blocks.add(1, attrs)
            m.messages_committed.add(len(hashes), attrs)
            m.block_messages.record(len(hashes), attrs)
            m.block_apply.record(end - self.start, attrs)
            reasons = Counter(d.error.reason.value for d in out.dropped)
            for reason, n in reasons.items():
                m.messages_dropped.add(n, {"chain.reason_code": reason})
            if t.last_block_ms and header.timestamp_ms >= t.last_block_ms:
                m.block_interval.record((header.timestamp_ms - t.last_block_ms) / 1000)
            now = t.clock()
            for a in admitted:
                if a is not None:
                    m.commit_latency.record(max(0.0, now - a.at))
        t.last_block_ms = int(header.timestamp_ms)
        if t.tracer is not None:
            self._span(t.tracer, out, admitted, built, end)

    def _ns(self, at: float) -> int:
        return self.start_ns + int((at - self.start) * 1e9)

    def _span(
        self, tracer: Tracer, out: BlockOutput, admitted: list[Admission | None], built: float, end: float
    ) -> None:
        contexts: dict[tuple[int, int], SpanContext] = {}
        counts: Counter[tuple[int, int]] = Counter()
        for a in admitted:
            if a is not None and a.span is not None:
                key = (a.span.trace_id, a.span.span_id)
                contexts[key] = a.span
                counts[key] += 1
        header = out.block.header
        span = tracer.start_span(
            "chain.block",
            context=trace.set_span_in_context(trace.INVALID_SPAN),  # a trace of its own
            links=[trace.Link(contexts[key], {"chain.messages": n}) for key, n in counts.items()],
            start_time=self.start_ns,
            attributes={
                "chain.block.number": int(header.number),
                "chain.block.messages": len(out.applied),
                "chain.block.dropped": len(out.dropped),
                "chain.block.source": self.source,
                "chain.block.build_ms": round((built - self.start) * 1000, 3),
                "chain.block.commit_ms": round((end - built) * 1000, 3),
                "chain.block.linked_submissions": len(counts),
            },
        )
        parent = trace.set_span_in_context(span)
        if self.built_at is not None:
            tracer.start_span("chain.block.build", context=parent, start_time=self.start_ns).end(self._ns(built))
        tracer.start_span("chain.block.commit", context=parent, start_time=self._ns(built)).end(self._ns(end))
        span.end(self._ns(end))
