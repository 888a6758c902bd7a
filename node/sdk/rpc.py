"""ChainClient: the synchronous gRPC client of a chain node (AsyncChainClient, node.sdk.aio, is its twin).

with ChainClient("localhost:50051") as c:
    h = c.submit(msg)
    committed = c.wait_committed(h)
    project = c.get_project(project_id=pid).project
    for commit in c.iter_commits(project_id=pid): ...
    for event in c.subscribe_blocks(): ...

with ChainClient("grpcs://node.example:50051", ca_file=Path("ca.pem")) as c: ...

Every call raises a node.sdk.errors.ChainError (a subclass per reason family) when it fails. The reads are
node.sdk.reads (generated from the service descriptors), their iterators node.sdk.read_iters; `stub` and
`keychain` are the raw generated stubs (they raise raw gRPC errors).

Targets (node/tls.py): `grpcs://host:port` and `https://host:port` are TLS, checked against `ca_file` (the
system's roots without one); `grpc://`, `http://` and a bare `host:port` are plaintext. The admin channel
(`admin_target`) takes TLS from its own scheme, and a bare admin address follows the main target's; it
presents `cert_file`/`key_file` when given (a node with TLS requires a client certificate on its admin
listener). The admin token goes only over TLS or to a loopback address: anything else is a `ConfigError`.
A TLS handshake that fails raises TLSError naming the target and the CA (`tls_problem` gives that line for
a raw gRPC error).

`retry_seconds`: how long a write refused as a whole *for now* is sent again, waiting each time as long as
the refusal's `retry-after-ms` says (no leader yet, a draining node, a store or etcd that cannot write).
Such a refusal admitted nothing, so sending the same messages again is safe. 0 (the default here; chainctl
gives 30) raises the first refusal. A refusal without the hint, or one whose wait would end past the
budget, is raised as it came.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator, Iterable, Sequence
from pathlib import Path
from types import TracebackType
from typing import TypeVar

import grpc

from chain.v1 import (
    admin_service_pb2_grpc,
    block_pb2,
    keychain_service_pb2_grpc,
    rpc_pb2,
    service_pb2_grpc,
)
from chain.v1 import message_pb2 as pb
from node.errors import ConfigError
from node.sdk import calls
from node.sdk.consistency import ReadOptions, height_of, read_metadata
from node.sdk.errors import (
    ChainError,
    Dropped,
    NotFound,
    OutcomeUnknown,
    from_rpc,
    reason_of,
    retry_after,
    target_text,
    tls_problem,
    tls_reason,
)
from node.sdk.read_iters import ReadIterators
from node.sdk.streams import Cursor, Reconnect, follow
from node.tls import ClientTLS, is_loopback, parse_target, sync_channel

__all__ = [
    "ChainClient",
    "Dropped",
    "reason_of",
    "retry_after",
    "target_text",
    "tls_problem",
    "tls_reason",
]

T = TypeVar("T")
Req = TypeVar("Req")
Resp = TypeVar("Resp")


class ChainClient(ReadIterators):
    """A synchronous client of one chain node: writes, typed reads, paginated iterators, resumable streams."""

    def __init__(
        self,
        target: str,
        *,
        timeout: float = 30.0,
        admin_target: str = "",
        admin_token: str = "",
        retry_seconds: float = 0.0,
        on_retry: Callable[[grpc.RpcError, float], None] | None = None,
        ca_file: Path | None = None,
        cert_file: Path | None = None,
        key_file: Path | None = None,
        server_name: str = "",
        session: bool = True,
    ) -> None:
        self.target = parse_target(target)
        self.tls = ClientTLS(ca_file, cert_file, key_file, server_name)
        admin = parse_target(admin_target, secure=self.target.secure) if admin_target else None
        if admin_token and admin is not None and not admin.secure and not is_loopback(admin.address):
            raise ConfigError(
                f"refusing to send the admin token in plaintext to {admin.address}: use grpcs:// or a loopback address"
            )
        self.admin_address = admin
        self.channel = sync_channel(self.target.address, self.tls, calls.CHANNEL_OPTIONS, secure=self.target.secure)
        self.stub = service_pb2_grpc.ChainServiceStub(self.channel)
        self.keychain = keychain_service_pb2_grpc.KeychainServiceStub(self.channel)
        self.timeout = timeout
        self._admin_channel = sync_channel(admin.address, self.tls, secure=admin.secure) if admin is not None else None
        self.admin = (
            admin_service_pb2_grpc.AdminServiceStub(self._admin_channel) if self._admin_channel is not None else None
        )
        self.admin_metadata = (("authorization", f"Bearer {admin_token}"),) if admin_token else ()
        self.retry_seconds = retry_seconds
        self.on_retry = on_retry  # told (refusal, seconds to wait) before each retry
        self.session_height = 0  # the highest block a commit of this client was seen in (wait_committed)
        self.session = session  # reads carry chain-min-height: session_height (node.sdk.consistency)
        self.last_height = 0  # the height the last read's answer reflects (its chain-height)

    def __enter__(self) -> ChainClient:
        return self

    def __exit__(self, *exc: tuple[type[BaseException] | None, BaseException | None, TracebackType | None]) -> None:
        self.close()

    def close(self) -> None:
        """Close the channels (open streams end)."""
        self.channel.close()
        if self._admin_channel is not None:
            self._admin_channel.close()

    def error(self, err: grpc.RpcError) -> ChainError:
        """The ChainError for a raw gRPC error of this client's channel (TLS failures name its target)."""
        return from_rpc(err, self.target, self.tls)

    def _unary(self, method: grpc.UnaryUnaryMultiCallable[Req, Resp], request: Req, timeout: float | None) -> Resp:
        try:
            return method(request, timeout=self.timeout if timeout is None else timeout)
        except grpc.RpcError as err:
            raise self.error(err) from None

    def _read(
        self, method: grpc.UnaryUnaryMultiCallable[Req, Resp], request: Req, timeout: float | None, read: ReadOptions
    ) -> Resp:
        """A typed read at the consistency `read` asks, and with `session` at or past this client's last commit;
        `last_height` is then the height its answer reflects."""
        metadata = read_metadata(read, self.session_height if self.session else 0)
        try:
            response, call = method.with_call(
                request, timeout=self.timeout if timeout is None else timeout, metadata=metadata
            )
        except grpc.RpcError as err:
            raise self.error(err) from None
        self.last_height = height_of(call.trailing_metadata())
        return response

    # ---- writes ----
    def submit(self, msg: pb.Message) -> bytes:
        """Submit one signed message; its hash once the node accepted it into its mempool."""
        req = rpc_pb2.SubmitMessageRequest(message=msg)
        resp = self._retrying(lambda: self.stub.SubmitMessage(req, timeout=self.timeout))
        return bytes(resp.hash)

    def batch(self, msgs: Sequence[pb.Message]) -> list[rpc_pb2.SubmitResult]:
        """Submit messages in one call: a result per message (`error_of(result)` is its rejection, if any).
        A refusal of the whole batch (BATCH_TOO_LARGE, NOT_LEADER, ...) raises."""
        req = rpc_pb2.BatchSubmitMessagesRequest(messages=msgs)
        return list(self._retrying(lambda: self.stub.BatchSubmitMessages(req, timeout=self.timeout)).results)

    def dry_run(self, msg: pb.Message, *, timeout: float | None = None) -> rpc_pb2.DryRunMessageResponse:
        """Validate a message against the current state without submitting it (`error_of(resp)`: why not)."""
        return self._unary(self.stub.DryRunMessage, rpc_pb2.DryRunMessageRequest(message=msg), timeout)

    def _retrying(self, call: Callable[[], T]) -> T:
        deadline = time.monotonic() + self.retry_seconds
        while True:
            try:
                return call()
            except grpc.RpcError as raw:
                err = self.error(raw)
                wait = err.retry_after
                if wait is None or time.monotonic() + wait > deadline:
                    raise err from None
                if self.on_retry is not None:
                    self.on_retry(err, wait)
                time.sleep(wait)

    def wait_committed(self, message_hash: bytes, timeout: float = 30.0) -> block_pb2.CommittedMessage:
        """The committed message, once it is in a block. Dropped at once when the node says it dropped it
        (with the reason and the height); DeadlineExceeded (a TimeoutError) when it is not committed within
        `timeout` seconds. Moves `session_height` on to its block."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                found = self.get_message(hash=message_hash).message
            except Dropped:
                raise
            except NotFound:
                pass
            else:
                self.session_height = max(self.session_height, int(found.block_number))
                return found
            if time.monotonic() > deadline:
                raise calls.not_committed(message_hash, timeout)
            time.sleep(0.05)

    def commit(self, *msgs: pb.Message, timeout: float = 30.0) -> calls.Committed:
        """Submit messages (in order, one batch) and wait until all are committed: the committed messages,
        with `height` (the block the last one is in). A rejected message raises its Rejected subclass (the
        first one refused; nothing of a refused message is applied). When the node cannot tell what became
        of the batch (OutcomeUnknown: it forwarded it and got no answer) each message is looked up instead:
        committed, Dropped, or DeadlineExceeded after `timeout`."""
        try:
            results = self.batch(msgs)
        except OutcomeUnknown as err:
            return calls.Committed(self.wait_committed(h, timeout) for h in calls.unknown_hashes(err, msgs))
        calls.raise_rejected(results)
        return calls.Committed(self.wait_committed(r.hash, timeout) for r in results)

    # ---- streams ----
    def subscribe_blocks(
        self,
        *,
        after_event_id: int | None = None,
        from_block: int | None = None,
        include_chunks: bool = False,
        resume: bool = True,
        reconnect_seconds: float = calls.RECONNECT_SECONDS,
    ) -> Generator[rpc_pb2.SubscribeBlocksResponse, None, None]:
        """Committed blocks as they come (event id: the block number), from after `after_event_id` (0: from
        the first), from `from_block`, or from now (neither given). With `resume`, a broken stream is reopened
        from the last block received (node.sdk.streams): no gap, no repeat."""

        def open_stream(c: Cursor) -> Iterable[rpc_pb2.SubscribeBlocksResponse]:
            req = rpc_pb2.SubscribeBlocksRequest(
                after_event_id=c.after_event_id, from_block=c.from_block, include_chunks=include_chunks
            )
            return self.stub.SubscribeBlocks(req)

        cursor = Cursor.start(after_event_id, from_block)
        if resume and cursor is None:
            cursor = Cursor.after(calls.head_block(self.list_blocks(page_size=1)))
        return follow(open_stream, cursor or Cursor(), self.error, Reconnect(reconnect_seconds) if resume else None)

    def subscribe_messages(
        self,
        *,
        project_id: bytes = b"",
        types: Sequence[pb.MessageType.ValueType] = (),
        after_event_id: int | None = None,
        from_block: int | None = None,
        resume: bool = True,
        reconnect_seconds: float = calls.RECONNECT_SECONDS,
    ) -> Generator[rpc_pb2.SubscribeMessagesResponse, None, None]:
        """Committed messages as they come (of `project_id`, of `types`, when given), from after
        `after_event_id` (0: from the first), from `from_block`, or from now (neither given). With `resume`,
        a broken stream is reopened from the last event id received (node.sdk.streams): no gap, no repeat."""

        def open_stream(c: Cursor) -> Iterable[rpc_pb2.SubscribeMessagesResponse]:
            req = rpc_pb2.SubscribeMessagesRequest(
                project_id=project_id, types=types, after_event_id=c.after_event_id, from_block=c.from_block
            )
            return self.stub.SubscribeMessages(req)

        cursor = Cursor.start(after_event_id, from_block)
        if resume and cursor is None:
            cursor = Cursor.after(self.get_chain_stats().stats.total_messages)
        return follow(open_stream, cursor or Cursor(), self.error, Reconnect(reconnect_seconds) if resume else None)
