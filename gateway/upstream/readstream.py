"""One long-lived ReadStream call per node channel: the gateway's read batches as messages of a stream.

A unary gRPC call costs the node ~340-380 µs of CPU whatever it carries; a message on a stream already open
~110 µs: a third of the node's CPU per REST GET is saved. This side's cost
per batch is about the same either way (grpc runs the send in the calling thread either way). So the ReadBatcher
(gateway/upstream/batching.py) sends each batch as one `ReadStreamRequest` on a stream it keeps open, numbered, and
waits for the response that carries its number (node/server/rpc/read_batch.py answers them in order).

- The stream opens with the first batch and stays open; one that has ended is replaced by the next batch.
- One write at a time: gRPC allows one message in flight per call, so the batches take turns.
- A batch waits until the latest deadline of its items, then raises TimeoutError (the batcher answers its
  items DEADLINE_EXCEEDED, as a call's deadline would). A write still held up then (a node that does not
  read) resets the stream.
- A stream that ends leaves every batch it had not answered to a ReadBatch call (`Resend`), whose own
  outcome is then the batch's, exactly as without the stream: the stream is a cheaper way to the same
  answers and decides no failure itself. The only exception is the gateway stopping (the channel closed):
  the batches are cancelled. Why every status: the node ends its streams with OK when it stops (the call
  is then refused, UNAVAILABLE, and retried on another node); a node older than the RPC answers
  UNIMPLEMENTED (and no stream is tried on this channel for REPROBE seconds); a write that races the
  node's end of the stream makes grpc fail the call as INTERNAL ("Internal error from Core"), which is not
  the node's answer to anything (tests/gateway/test_read_batch.py, a node stopping under load, saw it in
  3 runs of 20 when the stream's status was passed on); a node that went away refuses the call at once.
- Streams that keep ending without an answer are not reopened batch after batch: from the second such
  stream in a row, no stream is tried on the channel for BACKOFF seconds, doubled with each further one
  up to REPROBE; any answer on a stream ends the run. Falling back costs nothing but the saving: the
  batches go as calls meanwhile. (A stopping node ends every new stream at once; a node whose streams
  break, e.g. on a resource limit, would otherwise pay a stream's start and its failure per batch.)
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import grpc

from chain.v1 import read_batch_service_pb2 as pb

PATH = "/chain.v1.ReadBatchService/ReadStream"
REPROBE = 30.0  # seconds without a stream (or, gateway/upstream/batching.py, batches) after a node said UNIMPLEMENTED
BACKOFF = 0.5  # seconds without a stream after the second stream in a row that ended with no answer


class Resend(Exception):
    """The stream ended without answering this batch: send it as a ReadBatch call."""


@dataclass(eq=False)
class _Open:
    """One stream call, the batches written on it and not yet answered (by id), and how it ended."""

    call: Any  # grpc.aio.StreamStreamCall
    waiting: dict[int, asyncio.Future[pb.ReadBatchResponse]] = field(default_factory=dict)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    reset: bool = False  # cancelled by this process to be replaced (not: the gateway stopping)
    answered: bool = False  # a batch was answered on it
    ended: Callable[[asyncio.Future[pb.ReadBatchResponse]], None] | None = None  # settles what still waits


class ReadStream:
    """The ReadStream of one channel (one per upstream node, gateway/upstream/pool.py)."""

    def __init__(self, channel: grpc.aio.Channel) -> None:
        self._start_call: Any = channel.stream_stream(
            PATH,
            request_serializer=pb.ReadStreamRequest.SerializeToString,
            response_deserializer=pb.ReadStreamResponse.FromString,
        )
        self._open: _Open | None = None
        self._ids = itertools.count(1)
        self._readers: set[asyncio.Task[None]] = set()
        self.refused_until = 0.0  # loop time until which no stream is tried (UNIMPLEMENTED, or the back-off)
        self.barren = 0  # streams in a row that ended without answering a batch
        self.opened = 0  # streams started (the tests read it)

    def usable(self, now: float) -> bool:
        return now >= self.refused_until

    async def exchange(self, request: pb.ReadStreamRequest, deadline: float) -> pb.ReadBatchResponse:
        """`request`'s answer (its id is set here); raises Resend when the stream ended without it (whatever
        the status), TimeoutError at `deadline` (loop time), or CancelledError when the channel closed."""
        stream = self._open
        if stream is None or stream.ended is not None:
            stream = self._open = self._start()
        request.id = ident = next(self._ids)
        answer: asyncio.Future[pb.ReadBatchResponse] = asyncio.get_running_loop().create_future()
        stream.waiting[ident] = answer  # from here on the reader settles it, whenever the stream ends
        writing = True
        try:
            async with asyncio.timeout_at(deadline):
                async with stream.lock:
                    # a write that fails finds the stream ended: its reader settles `answer`
                    with contextlib.suppress(grpc.aio.AioRpcError, asyncio.InvalidStateError):
                        await stream.call.write(request)
                writing = False
                return await answer
        except TimeoutError:
            if writing:  # the write was cut short, which ends the call (grpc cancels it): what waits on it
                stream.reset = True  # is resent, not failed as if the gateway were stopping
                stream.call.cancel()
            raise
        finally:
            stream.waiting.pop(ident, None)

    def _start(self) -> _Open:
        stream = _Open(self._start_call())
        self.opened += 1
        reader = asyncio.get_running_loop().create_task(self._read(stream))
        self._readers.add(reader)  # held until it ends (the loop keeps only weak references)
        reader.add_done_callback(self._readers.discard)
        return stream

    def _back_off(self, stream: _Open) -> None:
        """Counts the streams in a row that ended without an answer; from the second, no stream for a while."""
        if stream.answered:
            return
        self.barren += 1
        if self.barren >= 2:
            pause = min(REPROBE, BACKOFF * 2 ** min(self.barren - 2, 8))  # the power bounded: no overflow
            self.refused_until = max(self.refused_until, asyncio.get_running_loop().time() + pause)

    async def _read(self, stream: _Open) -> None:
        """Hands each answer to its batch; when the stream ends, settles every batch still waiting."""
        ended: Callable[[asyncio.Future[pb.ReadBatchResponse]], None]
        try:
            async for response in stream.call:
                answer = stream.waiting.pop(response.id, None)
                if answer is not None and not answer.done():
                    answer.set_result(response.batch)
                stream.answered = True
                self.barren = 0
            ended = _resend  # the node ended it with status OK: it is stopping
        except asyncio.CancelledError:  # cancelled here: reset (to be replaced), or the channel closed
            ended = _resend if stream.reset else _cancel
        except grpc.aio.AioRpcError as err:  # whatever status: the batches' calls will have their own
            if err.code() == grpc.StatusCode.UNIMPLEMENTED:
                self.refused_until = asyncio.get_running_loop().time() + REPROBE
            ended = _resend
        if ended is _resend:
            self._back_off(stream)
        stream.ended = ended
        for answer in stream.waiting.values():
            if not answer.done():
                ended(answer)
        stream.waiting.clear()


def _resend(answer: asyncio.Future[Any]) -> None:
    answer.set_exception(Resend())


def _cancel(answer: asyncio.Future[Any]) -> None:
    answer.cancel()
