"""Every reason code's category, and each category's status on each transport: the one table.

    CATEGORY[Reason.NONCE_MISMATCH]             # Category.PRECONDITION
    CATEGORY[Reason.NONCE_MISMATCH].value.grpc  # "FAILED_PRECONDITION" (a grpc.StatusCode name)
    CATEGORY[Reason.NONCE_MISMATCH].value.http  # 409

A category is what kind of failure a reason is (the request is malformed, it is too large, the node is busy,
the state does not allow it, ...); the transports read their status from it: the node's gRPC status
(node/server/rpc/status.py, `REASON_STATUS`) and the gateway's HTTP status (gateway/errors.py,
`REASON_HTTP_STATUS`). A new reason is added to `Reason` (node/errors.py) and to one category here; both
transports then answer it. The table is total (the import fails on a reason in two categories; the tests
check that none is missing). gRPC statuses are named, not imported: this module needs no grpc.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from types import MappingProxyType

from node.errors import Reason


@dataclass(frozen=True)
class Statuses:
    """A category's status on each transport: the name of a `grpc.StatusCode`, an HTTP status."""

    grpc: str
    http: int


class Category(Enum):
    """What kind of failure a reason is, and its status per transport."""

    INVALID = Statuses("INVALID_ARGUMENT", 400)  # the request or message is malformed
    NOT_ACCEPTABLE = Statuses("INVALID_ARGUMENT", 406)  # no answer in a media type the client accepts
    UNSUPPORTED_MEDIA = Statuses("INVALID_ARGUMENT", 415)  # a body in a media type not taken here
    UNAUTHENTICATED = Statuses("UNAUTHENTICATED", 401)
    FORBIDDEN = Statuses("PERMISSION_DENIED", 403)  # the signer may not do this
    NOT_FOUND = Statuses("NOT_FOUND", 404)
    METHOD_NOT_ALLOWED = Statuses("UNIMPLEMENTED", 405)
    EXISTS = Statuses("ALREADY_EXISTS", 409)
    PRECONDITION = Statuses("FAILED_PRECONDITION", 409)  # the state does not allow it (now)
    ABORTED = Statuses("ABORTED", 409)
    TOO_LARGE = Statuses("RESOURCE_EXHAUSTED", 413)  # the size of the request, not load or quota
    EXHAUSTED = Statuses("RESOURCE_EXHAUSTED", 429)  # a limit, a quota or load: later, or less
    INTERNAL = Statuses("INTERNAL", 500)
    UNIMPLEMENTED = Statuses("UNIMPLEMENTED", 501)
    BAD_GATEWAY = Statuses("UNAVAILABLE", 502)
    UNAVAILABLE = Statuses("UNAVAILABLE", 503)  # this node cannot take it now; another node, or later, can
    CORRUPTED = Statuses("DATA_LOSS", 503)  # that node's store failed an integrity check; another can answer
    DEADLINE = Statuses("DEADLINE_EXCEEDED", 504)


R = Reason
C = Category

_GROUPS: Mapping[Category, tuple[Reason, ...]] = MappingProxyType(
    {
        C.INVALID: (
            R.MALFORMED_MESSAGE,
            R.DATA_BYTES_MISMATCH,
            R.HASH_MISMATCH,
            R.INVALID_SIGNATURE,
            R.WRONG_NETWORK,
            R.UNKNOWN_MESSAGE_TYPE,
            R.DISABLED_MESSAGE_TYPE,
            R.BODY_MISMATCH,
            R.INVALID_FIELD,
            R.FUTURE_TIMESTAMP,
            R.STALE_TIMESTAMP,
            R.INVALID_ARGUMENT,
        ),
        C.NOT_ACCEPTABLE: (R.NOT_ACCEPTABLE,),
        C.UNSUPPORTED_MEDIA: (R.UNSUPPORTED_MEDIA_TYPE,),
        C.UNAUTHENTICATED: (R.UNAUTHENTICATED,),
        C.FORBIDDEN: (
            R.UNKNOWN_SIGNER,
            R.INSUFFICIENT_SCOPE,
            R.PROJECT_NOT_ALLOWED,
            R.PERMISSION_DENIED,
            R.CUSTODY_SIGNATURE_INVALID,
            R.CUSTODY_KEY_UNKNOWN,
            R.CUSTODY_KEY_REVOKED,
            R.CUSTODY_KEY_EXPIRED,
            R.CUSTODY_KEY_NOT_ADMIN,
            R.NOT_STORAGE_AUTHORITY,
        ),
        C.NOT_FOUND: (R.NOT_FOUND, R.MESSAGE_DROPPED),
        C.METHOD_NOT_ALLOWED: (R.METHOD_NOT_ALLOWED,),
        C.EXISTS: (R.DUPLICATE_MESSAGE, R.ALREADY_EXISTS, R.NAME_TAKEN),
        C.PRECONDITION: (
            R.STALE_UPDATE,
            R.TOMBSTONED,
            R.NOT_PRESENT,
            R.NONCE_MISMATCH,
            R.AUTH_WINDOW_INVALID,
            R.AUTH_EXPIRED,
            R.AUTH_NOT_YET_VALID,
            R.PROJECT_NOT_FOUND,
            R.PROJECT_ARCHIVED,
            R.PROJECT_REMOVED,
            R.REF_NONCE_MISMATCH,
            R.REF_HASH_MISMATCH,
            R.REF_NOT_FOUND,
            R.NOT_FAST_FORWARD,
            R.COMMIT_NOT_FOUND,
            R.MERGE_REQUEST_NOT_FOUND,
            R.STATE_PRUNED,
        ),
        C.ABORTED: (R.CONFLICT,),
        C.TOO_LARGE: (R.MESSAGE_TOO_LARGE, R.BATCH_TOO_LARGE, R.PAYLOAD_TOO_LARGE),
        C.EXHAUSTED: (
            R.LIMIT_EXCEEDED,
            R.QUOTA_EXCEEDED,
            R.NO_STORAGE,
            R.MEMPOOL_FULL,
            R.RESOURCE_EXHAUSTED,
            R.SLOW_SUBSCRIBER,
            R.TOO_MANY_STREAMS,
        ),
        C.INTERNAL: (R.INTERNAL,),
        C.UNIMPLEMENTED: (R.UNIMPLEMENTED,),
        C.BAD_GATEWAY: (R.BAD_GATEWAY,),
        C.UNAVAILABLE: (
            R.NOT_LEADER,
            R.STATE_DIVERGED,
            R.STORAGE_FAILED,
            R.DRAINING,
            R.UNAVAILABLE,
            R.STREAM_GAP,
            R.HISTORY_UNAVAILABLE,
            R.HEIGHT_NOT_REACHED,
            R.CONSISTENCY_UNAVAILABLE,
        ),
        C.CORRUPTED: (R.DATA_CORRUPTED,),
        C.DEADLINE: (R.DEADLINE_EXCEEDED, R.OUTCOME_UNKNOWN),  # the outcome of a write is not known
    }
)


def _by_reason(groups: Mapping[Category, tuple[Reason, ...]]) -> Mapping[Reason, Category]:
    table = {reason: category for category, reasons in groups.items() for reason in reasons}
    assert len(table) == sum(len(r) for r in groups.values()), "a reason is listed under two categories"
    return MappingProxyType(table)


# Every reason's category (tests/gateway/test_error_tables.py checks that no member of `Reason` is missing).
CATEGORY: Mapping[Reason, Category] = _by_reason(_GROUPS)


def known_reason(code: str | None) -> Reason | None:
    """The `Reason` named `code`, or None for a code this build does not know (a newer node's)."""
    try:
        return Reason(code or "")
    except ValueError:
        return None
