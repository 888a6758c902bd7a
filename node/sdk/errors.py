"""The SDK's one exception hierarchy: every failed call of ChainClient and AsyncChainClient raises a ChainError.

```
ChainError                      reason, retry_after, retryable, values, field, details(), code()
├── Rejected                    the node refused a message: nothing of it was applied
│   ├── InvalidMessage          structure, signature, network, timestamps (MALFORMED_MESSAGE, INVALID_SIGNATURE, ...)
│   ├── Unauthorized            the signer may not do this (UNKNOWN_SIGNER, INSUFFICIENT_SCOPE, CUSTODY_*, ...)
│   ├── StateConflict           the state does not allow it now (NONCE_MISMATCH, STALE_UPDATE, NOT_FAST_FORWARD, ...)
│   ├── Duplicate               it exists already (DUPLICATE_MESSAGE, ALREADY_EXISTS, NAME_TAKEN)
│   └── LimitExceeded           also a ResourceExhausted (MESSAGE_TOO_LARGE, LIMIT_EXCEEDED, QUOTA_EXCEEDED, NO_STORAGE)
├── InvalidArgument             a bad read argument or client-side value (INVALID_ARGUMENT; `field` names it)
├── NotFound                    a read for something absent (NOT_FOUND)
│   └── Dropped                 GetMessage: the node admitted the message, then dropped it (MESSAGE_DROPPED): why, where
├── ResourceExhausted           a node limit (MEMPOOL_FULL, BATCH_TOO_LARGE, TOO_MANY_STREAMS, SLOW_SUBSCRIBER, ...)
├── Unavailable                 the node cannot answer now (NOT_LEADER, DRAINING, STORAGE_FAILED, UNAVAILABLE, ...)
│   └── TLSError                the TLS handshake failed (TLS_FAILED): wrong CA, wrong name, not TLS
├── DeadlineExceeded            the call's deadline passed (also a TimeoutError): the outcome of a write is unknown
│   └── OutcomeUnknown          a member forwarded the write and got no answer (OUTCOME_UNKNOWN): look the hashes up
└── InternalError               the node failed (INTERNAL, DATA_CORRUPTED)
```

`reason` is the node's stable code (`node.errors.Reason`, docs/errors.md) or the client's own (`CliCode`);
`retry_after` is the seconds the node asked to wait before the same call (its `retry-after-ms`), None when it
gave none. A ChainError is also a `grpc.RpcError` and a `grpc.Call` (`code()`, `details()`,
`trailing_metadata()`), so code written against raw gRPC errors keeps working.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

import grpc
import grpc.aio

from node.errors import FIELD, REASON_CODE, REASON_VALUES, RETRY_AFTER_MS, CliCode, Metadata, Reason, trailer
from node.tls import ClientTLS, Target, tls_failure


class ChainError(grpc.RpcError, grpc.Call):
    """A call to a chain node failed: `reason` says why (a stable code), `retry_after` when to try again.

    `details()` is the node's text, `values` the values that caused a rejection (its `reason-values`),
    `field` the request field a read refused, `code()` the gRPC status."""

    status: grpc.StatusCode = grpc.StatusCode.UNKNOWN

    def __init__(
        self,
        reason: str,
        detail: str = "",
        *,
        retry_after: float | None = None,
        values: Mapping[str, Any] | None = None,
        field: str | None = None,
        status: grpc.StatusCode | None = None,
        trailers: Metadata | None = None,
        text: str | None = None,
    ) -> None:
        self.reason = reason
        self.detail = detail
        self.retry_after = retry_after
        self.values: dict[str, Any] = dict(values or {})
        self.field = field
        if status is not None:
            self.status = status
        self._trailers = tuple(trailers or ((REASON_CODE, reason),))
        self._text = text if text is not None else error_text(reason, detail)
        super().__init__(self._text)

    def __str__(self) -> str:
        return self._text

    @property
    def retryable(self) -> bool:
        """True when the same call, unchanged, may succeed later (the node said when, or it was unreachable)."""
        return self.retry_after is not None or (isinstance(self, Unavailable) and not isinstance(self, TLSError))

    # ---- grpc.Call, for code written against raw gRPC errors ----
    def code(self) -> grpc.StatusCode:
        """The gRPC status of the failed call."""
        return self.status

    def details(self) -> str:
        """The node's text for the failure."""
        return self.detail

    def trailing_metadata(self) -> Any:  # (key, value) pairs: grpc-stubs types them as another class
        """The trailers of the failed call (`reason-code`, `reason-values`, `retry-after-ms`, `field`)."""
        return self._trailers

    def initial_metadata(self) -> tuple[tuple[str, str], ...]:
        return ()

    def is_active(self) -> bool:
        return False

    def time_remaining(self) -> float:
        return 0.0

    def cancel(self) -> bool:
        return False

    def add_callback(self, callback: Callable[[], None]) -> bool:
        return False


def error_text(reason: str, detail: str) -> str:
    """`REASON: detail`, the code said once: a node's text that starts with its code already (a rejection's
    `NOT_LEADER: no leader`) is not prefixed again."""
    body = detail.strip()
    if body == reason or body.startswith(f"{reason}: "):
        return body
    return f"{reason}: {body}" if body else reason


class Rejected(ChainError):
    """The node refused a message (submit, batch, commit, dry run): nothing of it was applied."""

    status = grpc.StatusCode.INVALID_ARGUMENT


class InvalidMessage(Rejected):
    """The message itself is malformed: structure, signature, network, fields or timestamp."""


class Unauthorized(Rejected):
    """The signer is not allowed to do this (unknown signer, scope, custody key, storage authority)."""

    status = grpc.StatusCode.PERMISSION_DENIED


class StateConflict(Rejected):
    """The current state does not allow the message (nonce, stale update, ref, missing or archived project)."""

    status = grpc.StatusCode.FAILED_PRECONDITION


class Duplicate(Rejected):
    """What the message creates exists already (the same message, a taken name)."""

    status = grpc.StatusCode.ALREADY_EXISTS


class ResourceExhausted(ChainError):
    """A limit of the node: a full mempool, a batch too large, too many streams, a subscriber too slow."""

    status = grpc.StatusCode.RESOURCE_EXHAUSTED


class LimitExceeded(Rejected, ResourceExhausted):
    """A message over a limit or quota of its account (size, limits, storage units): refused, not applied."""

    status = grpc.StatusCode.RESOURCE_EXHAUSTED


class InvalidArgument(ChainError):
    """A request argument is invalid (`field` names it when the node did)."""

    status = grpc.StatusCode.INVALID_ARGUMENT


class NotFound(ChainError):
    """A read asked for something that does not exist."""

    status = grpc.StatusCode.NOT_FOUND


class Unavailable(ChainError):
    """The node cannot answer now: unreachable, no leader, draining, its store failing. Retry (`retryable`)."""

    status = grpc.StatusCode.UNAVAILABLE


class TLSError(Unavailable):
    """The TLS handshake failed: the CA does not sign the node's certificate, a wrong name, or no TLS."""


class DeadlineExceeded(ChainError, TimeoutError):
    """The call's deadline passed; for a write the outcome is unknown (look the message hash up)."""

    status = grpc.StatusCode.DEADLINE_EXCEEDED


class Dropped(NotFound):
    """A message was accepted but dropped before commit (GetMessage's MESSAGE_DROPPED): `reason` is why (the
    reason code it was dropped for), `height` the block it was dropped at (None from a node that does not say),
    `message_hash` which; the node's text is kept as is."""

    @property
    def height(self) -> int | None:
        """The block the node dropped it at (a forwarding member: its height when the leader refused it)."""
        height = self.values.get("height")
        return int(height) if height is not None else None

    @property
    def message_hash(self) -> bytes | None:
        found = self.values.get("hash")
        return bytes.fromhex(str(found).removeprefix("0x")) if found else None


class OutcomeUnknown(DeadlineExceeded):
    """The member a write went to forwarded it to the leader and got no answer that says what became of it
    (OUTCOME_UNKNOWN): it may commit. `hashes` are the messages concerned; `wait_committed` on each says
    (committed, Dropped, or still unknown at its deadline). Never sent again blindly (not `retryable`)."""

    @property
    def hashes(self) -> list[bytes]:
        return [bytes.fromhex(str(h).removeprefix("0x")) for h in self.values.get("hashes", [])]


class InternalError(ChainError):
    """The node failed (a bug, or a store that failed an integrity check)."""

    status = grpc.StatusCode.INTERNAL


R = Reason


def _families(groups: Mapping[type[ChainError], tuple[str, ...]]) -> Mapping[str, type[ChainError]]:
    return MappingProxyType({reason: cls for cls, reasons in groups.items() for reason in reasons})


# Every node reason and the class it raises (tests/node/sdk/test_errors.py checks it is total and agrees with
# the node's status table); client codes that are not node reasons are listed too.
REASON_FAMILY: Mapping[str, type[ChainError]] = _families(
    {
        InvalidMessage: (
            *(R.MALFORMED_MESSAGE, R.DATA_BYTES_MISMATCH, R.HASH_MISMATCH, R.INVALID_SIGNATURE, R.WRONG_NETWORK),
            *(R.UNKNOWN_MESSAGE_TYPE, R.DISABLED_MESSAGE_TYPE, R.BODY_MISMATCH, R.INVALID_FIELD),
            *(R.FUTURE_TIMESTAMP, R.STALE_TIMESTAMP),
        ),
        InvalidArgument: (R.INVALID_ARGUMENT, R.NOT_ACCEPTABLE, R.UNSUPPORTED_MEDIA_TYPE),
        LimitExceeded: (R.MESSAGE_TOO_LARGE, R.LIMIT_EXCEEDED, R.QUOTA_EXCEEDED, R.NO_STORAGE),
        ResourceExhausted: (
            *(R.MEMPOOL_FULL, R.BATCH_TOO_LARGE, R.RESOURCE_EXHAUSTED, R.PAYLOAD_TOO_LARGE),
            *(R.SLOW_SUBSCRIBER, R.TOO_MANY_STREAMS),
        ),
        Duplicate: (R.DUPLICATE_MESSAGE, R.ALREADY_EXISTS, R.NAME_TAKEN),
        Unauthorized: (
            *(R.UNKNOWN_SIGNER, R.INSUFFICIENT_SCOPE, R.PROJECT_NOT_ALLOWED, R.PERMISSION_DENIED),
            *(R.CUSTODY_SIGNATURE_INVALID, R.CUSTODY_KEY_UNKNOWN, R.CUSTODY_KEY_REVOKED, R.CUSTODY_KEY_EXPIRED),
            *(R.CUSTODY_KEY_NOT_ADMIN, R.NOT_STORAGE_AUTHORITY),
        ),
        StateConflict: (
            *(R.STALE_UPDATE, R.TOMBSTONED, R.NOT_PRESENT, R.NONCE_MISMATCH, R.AUTH_WINDOW_INVALID),
            *(R.AUTH_EXPIRED, R.AUTH_NOT_YET_VALID, R.PROJECT_NOT_FOUND, R.PROJECT_ARCHIVED, R.PROJECT_REMOVED),
            *(R.REF_NONCE_MISMATCH, R.REF_HASH_MISMATCH, R.REF_NOT_FOUND, R.NOT_FAST_FORWARD, R.COMMIT_NOT_FOUND),
            *(R.MERGE_REQUEST_NOT_FOUND, R.STATE_PRUNED),
        ),
        Unavailable: (
            *(R.NOT_LEADER, R.STATE_DIVERGED, R.STORAGE_FAILED, R.DRAINING, R.UNAVAILABLE, R.BAD_GATEWAY),
            *(R.STREAM_GAP, R.HISTORY_UNAVAILABLE, R.HEIGHT_NOT_REACHED, R.CONSISTENCY_UNAVAILABLE),
        ),
        NotFound: (R.NOT_FOUND,),
        Dropped: (R.MESSAGE_DROPPED, CliCode.DROPPED),
        OutcomeUnknown: (R.OUTCOME_UNKNOWN,),
        InternalError: (R.INTERNAL, R.DATA_CORRUPTED),
        DeadlineExceeded: (R.DEADLINE_EXCEEDED, CliCode.TIMEOUT),
        ChainError: (R.CONFLICT, R.UNAUTHENTICATED, R.UNIMPLEMENTED, R.METHOD_NOT_ALLOWED, CliCode.UNKNOWN),
        TLSError: (CliCode.TLS_FAILED,),
        Rejected: (CliCode.REJECTED,),
    }
)

# A failure without a reason trailer (the transport's own: connection refused, deadline, cancelled).
STATUS_FAMILY: Mapping[grpc.StatusCode, type[ChainError]] = MappingProxyType(
    {
        grpc.StatusCode.INVALID_ARGUMENT: InvalidArgument,
        grpc.StatusCode.NOT_FOUND: NotFound,
        grpc.StatusCode.RESOURCE_EXHAUSTED: ResourceExhausted,
        grpc.StatusCode.UNAVAILABLE: Unavailable,
        grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineExceeded,
        grpc.StatusCode.INTERNAL: InternalError,
        grpc.StatusCode.DATA_LOSS: InternalError,
        grpc.StatusCode.PERMISSION_DENIED: Unauthorized,
        grpc.StatusCode.FAILED_PRECONDITION: StateConflict,
        grpc.StatusCode.ALREADY_EXISTS: Duplicate,
    }
)

DROPPED_RE = re.compile(r"dropped at block \d+: ([A-Z_]+)")


def family_of(reason: str, status: grpc.StatusCode | None = None) -> type[ChainError]:
    """The class a failure with `reason` raises (by `status` for a reason the SDK does not know)."""
    found = REASON_FAMILY.get(reason)
    if found is not None:
        return found
    return STATUS_FAMILY.get(status, ChainError) if status is not None else ChainError


def _is_call(err: BaseException) -> bool:
    return isinstance(err, (grpc.Call, grpc.aio.AioRpcError))


def reason_of(err: grpc.RpcError) -> str:
    """The stable reason code of a failed call: the node's `reason-code` trailer, else the gRPC status name."""
    if isinstance(err, ChainError):
        return err.reason
    if not _is_call(err):
        return CliCode.UNKNOWN
    call: Any = err
    return trailer(call.trailing_metadata(), REASON_CODE) or call.code().name


def retry_after(err: grpc.RpcError) -> float | None:
    """Seconds a refused call says to wait before trying again (its `retry-after-ms`); None when it says none."""
    if isinstance(err, ChainError):
        return err.retry_after
    if not _is_call(err):
        return None
    call: Any = err
    hint = trailer(call.trailing_metadata(), RETRY_AFTER_MS)
    try:
        return None if hint is None else max(0.0, int(hint) / 1000)
    except ValueError:
        return None


def from_rpc(err: grpc.RpcError, target: Target | None = None, tls: ClientTLS | None = None) -> ChainError:
    """The ChainError for a failed gRPC call (sync or grpc.aio): its class from the reason code, a failed TLS
    handshake as TLSError naming the target and the CA, a dropped message as Dropped."""
    if isinstance(err, ChainError):
        return err
    if not _is_call(err):
        return ChainError(CliCode.UNKNOWN, str(err) or type(err).__name__)
    call: Any = err
    status: grpc.StatusCode = call.code()
    metadata = call.trailing_metadata() or ()
    trailers = tuple((str(k), v.decode() if isinstance(v, bytes) else str(v)) for k, v in metadata)
    detail = " ".join((call.details() or "").split())
    problem = tls_problem(err, target, tls or ClientTLS()) if target is not None else None
    if problem is not None and target is not None and target.secure:
        return TLSError(CliCode.TLS_FAILED, problem, status=status, trailers=trailers)
    if problem is not None:  # a plaintext call a server closed: a TLS node, or one going away (retryable)
        detail = f"{detail} ({problem})"
    reason = trailer(trailers, REASON_CODE) or status.name
    values = _values(trailer(trailers, REASON_VALUES))
    if reason == Reason.MESSAGE_DROPPED:  # `reason` is why it was dropped, `values` say where
        why = str(values.get("reason") or CliCode.DROPPED)
        return Dropped(why, detail, values=values, status=status, trailers=trailers, text=detail)
    if status == grpc.StatusCode.NOT_FOUND and "dropped" in detail:  # a node that says it in words only
        dropped = DROPPED_RE.search(detail)
        why = dropped.group(1) if dropped is not None else CliCode.DROPPED
        return Dropped(why, detail, status=status, trailers=trailers, text=detail)
    cls = family_of(reason, status)
    return cls(
        reason,
        detail,
        retry_after=retry_after(err),
        values=values,
        field=trailer(trailers, FIELD),
        status=status,
        trailers=trailers,
    )


def _values(text: str | None) -> dict[str, Any]:
    if not text:
        return {}
    try:
        parsed = json.loads(text)
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def rejection(reason_code: str, detail: str) -> ChainError:
    """The error for a message a batch or a dry run refused (`SubmitResult.reason_code`, `detail`)."""
    reason = reason_code or CliCode.REJECTED
    return family_of(reason)(reason, detail)


def target_text(target: Target) -> str:
    """A target as the user wrote it: with `grpcs://` when it is TLS."""
    return f"grpcs://{target.address}" if target.secure else target.address


def tls_problem(err: grpc.RpcError, target: Target, tls: ClientTLS) -> str | None:
    """One line for a call that failed in the TLS handshake (or a plaintext call a TLS server closed), naming
    the target and the CA; None for any other failure."""
    if isinstance(err, TLSError):
        return err.detail
    if not _is_call(err):
        return None
    call: Any = err
    if call.code() != grpc.StatusCode.UNAVAILABLE:
        return None
    details = call.details() or ""
    where = target_text(target)
    if not target.secure:
        if "socket closed" in details.lower() or "connection reset" in details.lower():
            return (
                f"{where} closed the connection without a gRPC answer: if the node serves TLS, "
                f"use grpcs://{target.address}"
            )
        return None
    if "socket closed" in details.lower():
        return (
            f"{where} closed the connection in the TLS handshake: it takes only client certificates signed by "
            f"its CA ({tls.flags[1]}, {tls.flags[2]})"
        )
    if not (tls_failure(details) or "hostname verification" in details.lower()):
        return None
    return f"TLS with {where} failed: {tls_reason(details, target, tls)}"


def tls_reason(details: str, target: Target, tls: ClientTLS) -> str:
    """Why a TLS handshake failed, in words (from gRPC's details)."""
    text = details.upper()
    if "WRONG_VERSION_NUMBER" in text or "PACKET_LENGTH_TOO_LONG" in text or "HTTP_REQUEST" in text:
        return f"the server does not speak TLS (use grpc://{target.address} for a plaintext node)"
    if "HOSTNAME VERIFICATION" in text:
        name = tls.server_name or target.host
        return f"the node's certificate does not name {name!r}"
    if "CERTIFICATE_VERIFY_FAILED" in text or "BAD_SIGNATURE" in text or "ISSUER" in text:
        return f"the node's certificate is not signed by {tls.describe()}"
    if "CERTIFICATE_REQUIRED" in text or "PEER_DID_NOT_RETURN_A_CERTIFICATE" in text:
        return f"the node requires a client certificate ({tls.flags[1]}, {tls.flags[2]})"
    if "EXPIRED" in text:
        return "the node's certificate has expired"
    return f"handshake refused ({' '.join(details.split()[-12:])}); trusting {tls.describe()}"
