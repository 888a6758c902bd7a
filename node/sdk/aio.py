"""AsyncChainClient: ChainClient over grpc.aio, for asyncio programs.

async with AsyncChainClient("localhost:50051") as c:
    h = await c.submit(msg)
    committed = await c.wait_committed(h)
    project = (await c.get_project(project_id=pid)).project
    async for commit in c.iter_commits(project_id=pid): ...
    async for event in c.subscribe_blocks(): ...

The same targets, TLS files, errors (node.sdk.errors), reads (node.sdk.aio_reads, generated), iterators
(node.sdk.aio_read_iters) and stream resume (node.sdk.streams) as ChainClient. Create it inside the running
event loop (grpc.aio binds its channel to the loop).

`subscribe_blocks()`/`subscribe_messages()` are async generators: without `after_event_id` or `from_block`
they start from the head as it is when they are first iterated (ChainClient's, from when they are called).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, AsyncIterable, Awaitable, Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import TypeVar

import grpc
import grpc.aio

from chain.v1 import block_pb2, keychain_service_pb2_grpc, rpc_pb2, service_pb2_grpc
from chain.v1 import message_pb2 as pb
from node.sdk import calls
from node.sdk.aio_read_iters import AsyncReadIterators
from node.sdk.consistency import ReadOptions, height_of, read_metadata
from node.sdk.errors import ChainError, Dropped, NotFound, OutcomeUnknown, from_rpc
from node.sdk.streams import Cursor, Reconnect, afollow
from node.tls import ClientTLS, aio_channel, parse_target

T = TypeVar("T")
Req = TypeVar("Req")
Resp = TypeVar("Resp")


class AsyncChainClient(AsyncReadIterators):
    """An asyncio client of one chain node: writes, typed reads, paginated async iterators, resumable streams."""

    def __init__(
        self,
        target: str,
        *,
        timeout: float = 30.0,
        retry_seconds: float = 0.0,
        ca_file: Path | None = None,
        cert_file: Path | None = None,
        key_file: Path | None = None,
        server_name: str = "",
        session: bool = True,
    ) -> None:
        self.target = parse_target(target)
        self.tls = ClientTLS(ca_file, cert_file, key_file, server_name)
        self.channel = aio_channel(self.target.address, self.tls, calls.CHANNEL_OPTIONS, secure=self.target.secure)
        self.stub = service_pb2_grpc.ChainServiceStub(self.channel)
        self.keychain = keychain_service_pb2_grpc.KeychainServiceStub(self.channel)
        self.timeout = timeout
        self.retry_seconds = retry_seconds
        self.session_height = 0  # the highest block a commit of this client was seen in (wait_committed)
        self.session = session  # reads carry chain-min-height: session_height (node.sdk.consistency)
        self.last_height = 0  # the height the last read's answer reflects (its chain-height)

    async def __aenter__(self) -> AsyncChainClient:
        return self

    async def __aexit__(
        self, *exc: tuple[type[BaseException] | None, BaseException | None, TracebackType | None]
    ) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the channel (open streams end)."""
        await self.channel.close(grace=None)

    def error(self, err: grpc.RpcError) -> ChainError:
        """The ChainError for a raw gRPC error of this client's channel (TLS failures name its target)."""
        return from_rpc(err, self.target, self.tls)

    async def _unary(
        self, method: grpc.aio.UnaryUnaryMultiCallable[Req, Resp], request: Req, timeout: float | None
    ) -> Resp:
        try:
            return await method(request, timeout=self.timeout if timeout is None else timeout)
        except grpc.RpcError as err:
            raise self.error(err) from None

    async def _read(
        self,
        method: grpc.aio.UnaryUnaryMultiCallable[Req, Resp],
        request: Req,
        timeout: float | None,
        read: ReadOptions,
    ) -> Resp:
        """A typed read at the consistency `read` asks, and with `session` at or past this client's last commit;
        `last_height` is then the height its answer reflects."""
        metadata = read_metadata(read, self.session_height if self.session else 0)
        try:
            call = method(request, timeout=self.timeout if timeout is None else timeout, metadata=metadata)
            response = await call
            self.last_height = height_of(await call.trailing_metadata())
        except grpc.RpcError as err:
            raise self.error(err) from None
        return response

    async def _retrying(self, call: Callable[[], Awaitable[T]]) -> T:
        deadline = time.monotonic() + self.retry_seconds
        while True:
            try:
                return await call()
            except grpc.RpcError as raw:
                err = self.error(raw)
                wait = err.retry_after
                if wait is None or time.monotonic() + wait > deadline:
                    raise err from None
                await asyncio.sleep(wait)

    # ---- writes ----
    async def submit(self, msg: pb.Message) -> bytes:
        """Submit one signed message; its hash once the node accepted it into its mempool."""
        req = rpc_pb2.SubmitMessageRequest(message=msg)
        resp = await self._retrying(lambda: self.stub.SubmitMessage(req, timeout=self.timeout))
        return bytes(resp.hash)

    async def batch(self, msgs: Sequence[pb.Message]) -> list[rpc_pb2.SubmitResult]:
        """Submit messages in one call: a result per message (`error_of(result)` is its rejection, if any)."""
        req = rpc_pb2.BatchSubmitMessagesRequest(messages=msgs)
        resp = await self._retrying(lambda: self.stub.BatchSubmitMessages(req, timeout=self.timeout))
        return list(resp.results)

    async def dry_run(self, msg: pb.Message, *, timeout: float | None = None) -> rpc_pb2.DryRunMessageResponse:
        """Validate a message against the current state without submitting it (`error_of(resp)`: why not)."""
        return await self._unary(self.stub.DryRunMessage, rpc_pb2.DryRunMessageRequest(message=msg), timeout)

    async def wait_committed(self, message_hash: bytes, timeout: float = 30.0) -> block_pb2.CommittedMessage:
        """The committed message, once it is in a block (Dropped at once, DeadlineExceeded, `session_height`
        as ChainClient's)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                found = (await self.get_message(hash=message_hash)).message
            except Dropped:
                raise
            except NotFound:
                pass
            else:
                self.session_height = max(self.session_height, int(found.block_number))
                return found
            if time.monotonic() > deadline:
                raise calls.not_committed(message_hash, timeout)
            await asyncio.sleep(0.05)

    async def commit(self, *msgs: pb.Message, timeout: float = 30.0) -> calls.Committed:
        """Submit messages (in order, one batch) and wait until all are committed, with `height` (a rejection
        raises; an OutcomeUnknown is resolved by looking each message up, as ChainClient's)."""
        try:
            results = await self.batch(msgs)
        except OutcomeUnknown as err:
            return calls.Committed([await self.wait_committed(h, timeout) for h in calls.unknown_hashes(err, msgs)])
        calls.raise_rejected(results)
        return calls.Committed([await self.wait_committed(r.hash, timeout) for r in results])

    # ---- streams ----
    async def subscribe_blocks(
        self,
        *,
        after_event_id: int | None = None,
        from_block: int | None = None,
        include_chunks: bool = False,
        resume: bool = True,
        reconnect_seconds: float = calls.RECONNECT_SECONDS,
    ) -> AsyncGenerator[rpc_pb2.SubscribeBlocksResponse, None]:
        """ChainClient.subscribe_blocks as an async iterator."""

        def open_stream(c: Cursor) -> AsyncIterable[rpc_pb2.SubscribeBlocksResponse]:
            req = rpc_pb2.SubscribeBlocksRequest(
                after_event_id=c.after_event_id, from_block=c.from_block, include_chunks=include_chunks
            )
            return self.stub.SubscribeBlocks(req)

        cursor = Cursor.start(after_event_id, from_block)
        if resume and cursor is None:
            cursor = Cursor.after(calls.head_block(await self.list_blocks(page_size=1)))
        async for item in afollow(
            open_stream, cursor or Cursor(), self.error, Reconnect(reconnect_seconds) if resume else None
        ):
            yield item

    async def subscribe_messages(
        self,
        *,
        project_id: bytes = b"",
        types: Sequence[pb.MessageType.ValueType] = (),
        after_event_id: int | None = None,
        from_block: int | None = None,
        resume: bool = True,
        reconnect_seconds: float = calls.RECONNECT_SECONDS,
    ) -> AsyncGenerator[rpc_pb2.SubscribeMessagesResponse, None]:
        """ChainClient.subscribe_messages as an async iterator."""

        def open_stream(c: Cursor) -> AsyncIterable[rpc_pb2.SubscribeMessagesResponse]:
            req = rpc_pb2.SubscribeMessagesRequest(
                project_id=project_id, types=types, after_event_id=c.after_event_id, from_block=c.from_block
            )
            return self.stub.SubscribeMessages(req)

        cursor = Cursor.start(after_event_id, from_block)
        if resume and cursor is None:
            cursor = Cursor.after((await self.get_chain_stats()).stats.total_messages)
        async for item in afollow(
            open_stream, cursor or Cursor(), self.error, Reconnect(reconnect_seconds) if resume else None
        ):
            yield item
