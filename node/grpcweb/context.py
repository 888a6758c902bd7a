"""The servicer context that gRPC-web calls hand to the (grpc.aio) servicer methods.

It implements the part of `grpc.aio.ServicerContext` that aio servicers use, with the same semantics as the
native server: `abort` records the status and raises `grpc.aio.AbortError`; `set_code`/`set_details`/
`set_trailing_metadata` shape the final status; `write` and `send_initial_metadata` go to the HTTP
response. Authentication-context methods return what an insecure native port returns.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, NoReturn, Protocol

import grpc
import grpc.aio

from node.grpcweb.wire import Metadata, Metadatum

if TYPE_CHECKING:
    _AioContext = grpc.aio.ServicerContext[Any, Any]
else:
    _AioContext = grpc.aio.ServicerContext

log = logging.getLogger("chain.grpcweb")


class ResponseSink(Protocol):
    """Where a context sends what a servicer writes before it returns (implemented by the transport)."""

    async def send_initial_metadata(self, metadata: Metadata) -> None: ...

    async def send_message(self, message: Any) -> None: ...


def normalize_metadata(metadata: Any) -> Metadata:
    """Accept what grpc.aio accepts (a grpc.aio.Metadata or a sequence of pairs) as a tuple of pairs."""
    return tuple((str(key), value) for key, value in (metadata or ()))


class GrpcWebServicerContext(_AioContext):
    """One gRPC-web call's context; the transport reads the outcome through `status()`."""

    def __init__(
        self,
        *,
        method: str,
        invocation_metadata: tuple[Metadatum, ...],
        peer: str,
        deadline: float | None,
        sink: ResponseSink,
        response_streaming: bool,
    ) -> None:
        self.method = method
        self._metadata = invocation_metadata
        self._peer = peer
        self._deadline = deadline
        self._sink = sink
        self._response_streaming = response_streaming
        self._code: grpc.StatusCode | None = None
        self._details = ""
        self._trailing: Metadata = ()
        self._aborted = False
        self._cancelled = False
        self._done = False
        self._callbacks: list[Callable[[Any], None]] = []

    # --- status ---------------------------------------------------------------------------------------------

    async def abort(
        self,
        code: grpc.StatusCode,
        details: str = "",
        trailing_metadata: Any = (),
    ) -> NoReturn:
        if self._aborted:
            raise grpc.aio.UsageError("Abort already called!")
        self._aborted = True
        if code == grpc.StatusCode.OK:
            log.error("%s: abort() called with StatusCode.OK; answering UNKNOWN", self.method)
            code = grpc.StatusCode.UNKNOWN
        self._code = code
        self._details = details
        trailing = normalize_metadata(trailing_metadata)
        if trailing:
            self._trailing = trailing
        raise grpc.aio.AbortError()

    async def abort_with_status(self, status: grpc.Status) -> NoReturn:
        await self.abort(status.code, status.details, status.trailing_metadata)

    def set_code(self, code: grpc.StatusCode) -> None:
        self._code = code

    def set_details(self, details: str) -> None:
        self._details = details

    def set_trailing_metadata(self, trailing_metadata: Any) -> None:
        self._trailing = normalize_metadata(trailing_metadata)

    def code(self) -> grpc.StatusCode:
        return self._code or grpc.StatusCode.OK

    def details(self) -> str:
        return self._details

    # grpc-stubs type these two as grpc.aio.Metadata; grpc.aio itself returns tuples of pairs, as here.
    def trailing_metadata(self) -> Metadata:  # type: ignore[override]
        return self._trailing

    @property
    def deadline(self) -> float | None:
        """The call's deadline on the event loop's clock (from `grpc-timeout`), or None."""
        return self._deadline

    # --- request side ---------------------------------------------------------------------------------------

    def invocation_metadata(self) -> tuple[Metadatum, ...]:  # type: ignore[override]
        return self._metadata

    def peer(self) -> str:
        return self._peer

    def time_remaining(self) -> float | None:  # type: ignore[override]  # grpc.aio returns None without deadline
        if self._deadline is None:
            return None
        return max(0.0, self._deadline - asyncio.get_running_loop().time())

    def peer_identities(self) -> None:
        return None

    def peer_identity_key(self) -> None:
        return None

    def auth_context(self) -> Mapping[str, Any]:
        return {"transport_security_type": [b"insecure"]}

    async def read(self) -> NoReturn:
        raise grpc.aio.UsageError("read() is not available on a unary-request call")

    # --- response side --------------------------------------------------------------------------------------

    async def write(self, message: Any) -> None:
        if not self._response_streaming:
            raise grpc.aio.UsageError("write() is only available on a server-streaming call")
        if self._done:
            raise grpc.aio.UsageError("write() after the call finished")
        await self._sink.send_message(message)

    async def send_initial_metadata(self, initial_metadata: Any) -> None:
        await self._sink.send_initial_metadata(normalize_metadata(initial_metadata))

    def set_compression(self, compression: grpc.Compression) -> None:
        """Compression is not offered over gRPC-web; responses are always identity-encoded."""

    def disable_next_message_compression(self) -> None:
        """Nothing to disable: responses are never compressed."""

    # --- lifetime -------------------------------------------------------------------------------------------

    def cancelled(self) -> bool:
        return self._cancelled

    def done(self) -> bool:
        return self._done

    def add_done_callback(self, callback: Any) -> None:
        if self._done:
            self._run_callback(callback)
        else:
            self._callbacks.append(callback)

    def mark_cancelled(self) -> None:
        """The client went away, the deadline passed or the server is stopping: `cancelled()` turns true."""
        self._cancelled = True

    def finish(self, *, cancelled: bool) -> None:
        """Mark the call over (once) and run the done callbacks; called by the transport."""
        if self._done:
            return
        if cancelled:
            self.mark_cancelled()
        self._done = True
        callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            self._run_callback(callback)

    def _run_callback(self, callback: Callable[[Any], None]) -> None:
        try:
            callback(self)
        except Exception:
            log.exception("%s: done callback failed", self.method)
