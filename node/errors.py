"""Typed errors and the one vocabulary of codes a client can see.

One root per layer: `MessageRejected` (a message is invalid: structure,
signature or state), `NotFound` (a read for something absent), `InvalidBlock`
(a block does not match what applying it produced), `InvariantBroken` (a bug),
`ConfigError` (an operator's mistake at start-up: bad flags, a snapshot dir that
is not one; `main` prints it as one line and exits 2).

The vocabulary, all here and nowhere else (docs/errors.md):
- `Reason`: every code a node or the gateway answers with: the `reason-code`
  trailer, the `code` of an HTTP error body, the `reason` of an SSE error frame.
  The transports map it to gRPC status (node/server/rpc/status.py) and to HTTP
  status (gateway/errors.py), each with one total table.
- `CustodyReason`: why a custody signature was rejected; a client sees it as the
  `cause` value of `CUSTODY_SIGNATURE_INVALID`.
- `MerkleReason`: why the state tree refused a change or found a node corrupt
  (bugs: a client only ever sees `INTERNAL`).
- `CliCode`: the client side's own failure codes (chainctl's JSON error output,
  the SDK); a node's reason passes through them unchanged.
- `BackupReason`: why an off-cluster backup, prune or restore failed
  (`chain-node backup ...`: its one error line and exit status 1).
- The trailer names (`REASON_CODE`, `REASON_VALUES`, `RETRY_AFTER_MS`, `FIELD`),
  read by `trailer` only.
Operator condition reasons are Kubernetes CamelCase reasons shown by kubectl, not
client codes: they are `ConditionReason` in operator/chain_operator/conditions.py.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from enum import StrEnum
from typing import Any, NoReturn

# Trailing-metadata names of a failed call (gRPC trailers; HTTP headers in gRPC-web).
REASON_CODE = "reason-code"
REASON_VALUES = "reason-values"
RETRY_AFTER_MS = "retry-after-ms"
FIELD = "field"
# Consistent reads (docs/replication.md): the applied height a read's answer reflects (trailer), and what a
# read may ask for (request metadata): a state at or past a block, or the ordered log's height (linearizable).
CHAIN_HEIGHT = "chain-height"
CHAIN_MIN_HEIGHT = "chain-min-height"
CHAIN_READ_CONSISTENCY = "chain-read-consistency"
LINEARIZABLE = "linearizable"
SERIALIZABLE = "serializable"
# The details gRPC gives a call whose deadline passed (what a call answered some other way says too).
DEADLINE_DETAILS = "Deadline Exceeded"

# (key, value) pairs as grpc and grpc.aio hand them out (their stubs disagree on the item type).
Metadata = Iterable[Any]


def trailer(metadata: Metadata | None, name: str) -> str | None:
    """The value of trailer `name` in `metadata`, None when absent: the one reader of the names above."""
    for key, value in metadata or ():
        if key == name:
            return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
    return None


class Reason(StrEnum):
    """Stable codes a client can see (part of the public interface; never renamed)."""

    # envelope / structure
    MALFORMED_MESSAGE = "MALFORMED_MESSAGE"
    MESSAGE_TOO_LARGE = "MESSAGE_TOO_LARGE"
    DATA_BYTES_MISMATCH = "DATA_BYTES_MISMATCH"
    HASH_MISMATCH = "HASH_MISMATCH"
    INVALID_SIGNATURE = "INVALID_SIGNATURE"
    WRONG_NETWORK = "WRONG_NETWORK"
    UNKNOWN_MESSAGE_TYPE = "UNKNOWN_MESSAGE_TYPE"
    DISABLED_MESSAGE_TYPE = "DISABLED_MESSAGE_TYPE"
    BODY_MISMATCH = "BODY_MISMATCH"
    INVALID_FIELD = "INVALID_FIELD"
    # time
    FUTURE_TIMESTAMP = "FUTURE_TIMESTAMP"
    STALE_TIMESTAMP = "STALE_TIMESTAMP"
    # replay and conflicts
    DUPLICATE_MESSAGE = "DUPLICATE_MESSAGE"
    STALE_UPDATE = "STALE_UPDATE"
    TOMBSTONED = "TOMBSTONED"
    ALREADY_EXISTS = "ALREADY_EXISTS"
    NOT_PRESENT = "NOT_PRESENT"
    # authorization
    UNKNOWN_SIGNER = "UNKNOWN_SIGNER"
    INSUFFICIENT_SCOPE = "INSUFFICIENT_SCOPE"
    PROJECT_NOT_ALLOWED = "PROJECT_NOT_ALLOWED"
    PERMISSION_DENIED = "PERMISSION_DENIED"
    # custody
    CUSTODY_SIGNATURE_INVALID = "CUSTODY_SIGNATURE_INVALID"
    CUSTODY_KEY_UNKNOWN = "CUSTODY_KEY_UNKNOWN"
    CUSTODY_KEY_REVOKED = "CUSTODY_KEY_REVOKED"
    CUSTODY_KEY_EXPIRED = "CUSTODY_KEY_EXPIRED"
    CUSTODY_KEY_NOT_ADMIN = "CUSTODY_KEY_NOT_ADMIN"
    NONCE_MISMATCH = "NONCE_MISMATCH"
    AUTH_WINDOW_INVALID = "AUTH_WINDOW_INVALID"
    AUTH_EXPIRED = "AUTH_EXPIRED"
    AUTH_NOT_YET_VALID = "AUTH_NOT_YET_VALID"
    # projects and git objects
    PROJECT_NOT_FOUND = "PROJECT_NOT_FOUND"
    PROJECT_ARCHIVED = "PROJECT_ARCHIVED"
    PROJECT_REMOVED = "PROJECT_REMOVED"
    NAME_TAKEN = "NAME_TAKEN"
    REF_NONCE_MISMATCH = "REF_NONCE_MISMATCH"
    REF_HASH_MISMATCH = "REF_HASH_MISMATCH"
    REF_NOT_FOUND = "REF_NOT_FOUND"
    NOT_FAST_FORWARD = "NOT_FAST_FORWARD"
    COMMIT_NOT_FOUND = "COMMIT_NOT_FOUND"
    MERGE_REQUEST_NOT_FOUND = "MERGE_REQUEST_NOT_FOUND"
    # limits and quotas
    LIMIT_EXCEEDED = "LIMIT_EXCEEDED"
    QUOTA_EXCEEDED = "QUOTA_EXCEEDED"
    NO_STORAGE = "NO_STORAGE"
    NOT_STORAGE_AUTHORITY = "NOT_STORAGE_AUTHORITY"
    # submission pipeline
    MEMPOOL_FULL = "MEMPOOL_FULL"
    BATCH_TOO_LARGE = "BATCH_TOO_LARGE"
    # no leader could be reached and nothing was sent to one: not admitted anywhere, safe to send again
    NOT_LEADER = "NOT_LEADER"
    # a member forwarded the messages and got no answer it can trust (timeout, connection lost after sending,
    # a leader changed meanwhile): they may commit. Look each hash up (GetMessage) before sending anything else
    OUTCOME_UNKNOWN = "OUTCOME_UNKNOWN"
    # GetMessage: the node admitted this message and then dropped it (its reason and height in `reason-values`)
    MESSAGE_DROPPED = "MESSAGE_DROPPED"
    # the node cannot write its store (disk full, I/O error): retry later or elsewhere (`retry-after-ms`)
    STORAGE_FAILED = "STORAGE_FAILED"
    # the node is shutting down: streams end with this; reconnect to another node and resume
    DRAINING = "DRAINING"
    # replicated mode: this node's state differs from the log's (it stopped taking writes)
    STATE_DIVERGED = "STATE_DIVERGED"
    # the store failed an integrity check while serving (a hash mismatch, a damaged LMDB page)
    DATA_CORRUPTED = "DATA_CORRUPTED"
    # a walk of the state tree from a root this node no longer keeps whole (older than `--state-history`
    # blocks): ask a node that keeps it (an archive node, `--state-history all`), or read at the head
    STATE_PRUNED = "STATE_PRUNED"
    # a read asked for a state at or past a block (`chain-min-height`, or the log's height for a linearizable
    # read) that this node had not applied within the call's deadline: retry after `retry-after-ms`, or elsewhere
    HEIGHT_NOT_REACHED = "HEIGHT_NOT_REACHED"
    # a linearizable read (`chain-read-consistency: linearizable`) could not learn the ordered log's height
    # (etcd, or the followed upstream, did not answer in time): retry, or read at the default consistency
    CONSISTENCY_UNAVAILABLE = "CONSISTENCY_UNAVAILABLE"
    # reads and transport (typed errors other than rejections; the gateway's own answers)
    NOT_FOUND = "NOT_FOUND"
    INVALID_ARGUMENT = "INVALID_ARGUMENT"
    INTERNAL = "INTERNAL"
    UNAVAILABLE = "UNAVAILABLE"
    RESOURCE_EXHAUSTED = "RESOURCE_EXHAUSTED"
    DEADLINE_EXCEEDED = "DEADLINE_EXCEEDED"
    UNAUTHENTICATED = "UNAUTHENTICATED"
    UNIMPLEMENTED = "UNIMPLEMENTED"
    # HTTP-only answers of the gateway (routing, content negotiation, upstream)
    METHOD_NOT_ALLOWED = "METHOD_NOT_ALLOWED"
    NOT_ACCEPTABLE = "NOT_ACCEPTABLE"
    CONFLICT = "CONFLICT"
    PAYLOAD_TOO_LARGE = "PAYLOAD_TOO_LARGE"
    UNSUPPORTED_MEDIA_TYPE = "UNSUPPORTED_MEDIA_TYPE"
    BAD_GATEWAY = "BAD_GATEWAY"
    # event streams
    SLOW_SUBSCRIBER = "SLOW_SUBSCRIBER"
    # the node holds as many server streams as --max-streams allows: retry after `retry-after-ms`, or elsewhere
    TOO_MANY_STREAMS = "TOO_MANY_STREAMS"
    STREAM_GAP = "STREAM_GAP"
    HISTORY_UNAVAILABLE = "HISTORY_UNAVAILABLE"


class CustodyReason(StrEnum):
    """Why a custody signature was rejected (the `cause` of `CUSTODY_SIGNATURE_INVALID`)."""

    INVALID_SIGNATURE = "INVALID_SIGNATURE"
    UNSUPPORTED_SIGNATURE_TYPE = "UNSUPPORTED_SIGNATURE_TYPE"
    MALFORMED_SIGNATURE = "MALFORMED_SIGNATURE"
    HIGH_S_SIGNATURE = "HIGH_S_SIGNATURE"
    WEBAUTHN_FLAGS = "WEBAUTHN_FLAGS"
    WEBAUTHN_TYPE = "WEBAUTHN_TYPE"
    WEBAUTHN_CHALLENGE = "WEBAUTHN_CHALLENGE"
    WEBAUTHN_ORIGIN = "WEBAUTHN_ORIGIN"
    WEBAUTHN_RP_ID = "WEBAUTHN_RP_ID"


class MerkleReason(StrEnum):
    """Why the state tree refused a change or a stored node (callers' and storage bugs, never user input)."""

    PATH_LENGTH = "path is not 32 bytes"
    VALUE_HASH_LENGTH = "value hash is not 32 bytes"
    CHANGE_LENGTH = "path or value hash is not 32 bytes"
    DUPLICATE_PATH = "duplicate path"
    BAD_ENCODING = "not a 65-byte leaf or internal encoding"
    INTERNAL_TOO_DEEP = "internal node at depth"


class CliCode(StrEnum):
    """Failures of the client side itself (SDK, chainctl's JSON errors); node reasons pass through as `Reason`."""

    INVALID_ARGUMENT = "INVALID_ARGUMENT"
    WRONG_NETWORK = "WRONG_NETWORK"
    NOT_FAST_FORWARD = "NOT_FAST_FORWARD"
    ACCOUNT_NOT_INITIALIZED = "ACCOUNT_NOT_INITIALIZED"
    REJECTED = "REJECTED"
    DROPPED = "DROPPED"
    TIMEOUT = "TIMEOUT"
    UNKNOWN = "UNKNOWN"
    UNKNOWN_RPC = "UNKNOWN_RPC"
    GIT_ERROR = "GIT_ERROR"
    INTERRUPTED = "INTERRUPTED"
    NOTHING_TO_PUSH = "NOTHING_TO_PUSH"
    INVALID_NAME = "INVALID_NAME"
    INVALID_KEY = "INVALID_KEY"
    WRONG_KEY_TYPE = "WRONG_KEY_TYPE"
    KEY_EXISTS = "KEY_EXISTS"
    KEY_NOT_FOUND = "KEY_NOT_FOUND"
    INVALID_PROFILE = "INVALID_PROFILE"
    TLS_FAILED = "TLS_FAILED"  # the TLS handshake with the node failed (unknown CA, wrong name, not TLS)


class BackupReason(StrEnum):
    """Why `chain-node backup create|list|prune|restore` failed (docs/operations.md, "Back up to object storage")."""

    BUCKET_MISSING = "BUCKET_MISSING"
    ACCESS_DENIED = "ACCESS_DENIED"  # wrong or missing credentials, or a policy that refuses the call
    STORAGE_UNREACHABLE = "STORAGE_UNREACHABLE"  # the S3 endpoint does not answer (or answers 5xx)
    STORAGE_ERROR = "STORAGE_ERROR"  # any other refusal of the object store
    BACKUP_NOT_FOUND = "BACKUP_NOT_FOUND"
    INCOMPLETE_BACKUP = "INCOMPLETE_BACKUP"  # its manifest (written last) is missing: an interrupted upload
    CHECKSUM_MISMATCH = "CHECKSUM_MISMATCH"  # a chunk or the manifest does not hash to what was recorded
    SOURCE_UNAVAILABLE = "SOURCE_UNAVAILABLE"  # the node to back up does not answer, or holds no snapshot
    SOURCE_MISMATCH = "SOURCE_MISMATCH"  # the node serves a snapshot that is not a block of its own chain
    STORE_NOT_EMPTY = "STORE_NOT_EMPTY"  # restore into a data dir that holds a store (without --reinitialize)
    RESTORE_REFUSED = "RESTORE_REFUSED"  # the downloaded store failed verification; nothing was installed
    INVALID_ARGUMENT = "INVALID_ARGUMENT"


class ChainError(Exception):
    """Root of every error the node raises on purpose."""


class MessageRejected(ChainError):
    """A message is invalid; carries a stable reason code and the values that caused it."""

    def __init__(self, reason: Reason, detail: str = "", **values: Any) -> None:
        self.reason = reason
        self.detail = detail
        self.values = values
        super().__init__(f"{reason.value}: {detail}" if detail else reason.value)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MessageRejected) and (self.reason, self.detail, self.values) == (
            other.reason,
            other.detail,
            other.values,
        )

    def __hash__(self) -> int:
        return hash((self.reason, self.detail))


class NotFound(ChainError):
    """A read asked for something that does not exist."""

    def __init__(self, what: str, key: str = "") -> None:
        self.what = what
        self.key = key
        super().__init__(f"{what} not found" + (f": {key}" if key else ""))


class MessageDropped(NotFound):
    """GetMessage for a message this node admitted and then dropped: `reason` (a Reason code) and `detail`
    say why, `height` at which block (node/server/write/dropped.py). Reason code MESSAGE_DROPPED, a
    NOT_FOUND; the values go in `reason-values`."""

    def __init__(self, message_hash: str, reason: str, detail: str, height: int) -> None:
        self.message_hash = message_hash
        self.reason = reason
        self.detail = detail
        self.height = height
        super().__init__("message", f"{message_hash} was dropped at block {height}: {reason} {detail}".rstrip())


class InvalidArgument(ChainError):
    """A read request is malformed (bad address length, bad page token, ...)."""

    def __init__(self, field: str, detail: str) -> None:
        self.field = field
        self.detail = detail
        super().__init__(f"{field}: {detail}")


class InvalidBlock(ChainError):
    """Applying a block did not reproduce its header (count or state root)."""

    def __init__(self, number: int, field: str, expected: str, got: str) -> None:
        self.number = number
        self.field = field
        self.expected = expected
        self.got = got
        super().__init__(f"block {number}: {field} expected {expected}, got {got}")


class StorageFailed(ChainError):
    """Writing to the store failed (disk full, I/O error); nothing of that write was committed."""


class InvariantBroken(ChainError):
    """Internal state is inconsistent: a bug, never user input."""


class RestoreFailed(ChainError):
    """A restore or state sync could not put a verified store in place (damaged chunk, a snapshot that is not
    the log's block, no member serving one, out of time); nothing unchecked was installed."""


class MustRestart(ChainError):
    """The node drained and must be started again: a replicated member the etcd log was compacted past while
    it ran, whose next start state-syncs from a live member's snapshot. `chain-node` prints one line and exits
    with RESTART_EXIT_STATUS, for its supervisor (Kubernetes, systemd `Restart=on-failure`) to start it again."""


RESTART_EXIT_STATUS = 75  # EX_TEMPFAIL (sysexits.h): a temporary condition; starting again is the remedy


class BackupFailed(ChainError):
    """An off-cluster backup, listing, prune or restore could not be done; `reason` says why. A restore that
    fails installed nothing (the store is either absent or the previous one)."""

    def __init__(self, reason: BackupReason, detail: str) -> None:
        self.reason = reason
        self.detail = detail
        super().__init__(f"{reason.value}: {detail}")


class ConfigError(ChainError):
    """An operator's mistake at start-up (flags, environment, files): `main` prints one line and exits 2."""


CONFIG_EXIT_STATUS = 2


def config_exit(prog: str, err: ConfigError) -> NoReturn:
    """How every `main` ends on a `ConfigError`: one line on stderr, exit status 2, no traceback."""
    sys.stderr.write(f"{prog}: {err}\n")
    sys.stderr.flush()
    raise SystemExit(CONFIG_EXIT_STATUS)


class StatePruned(ChainError):
    """A walk of the state tree started from a root this store no longer keeps whole: its stale nodes were
    collected (`--state-history`, node/storage/retention.py). Reason code STATE_PRUNED, FAILED_PRECONDITION
    (HTTP 409): the data is gone on purpose, not damaged."""

    reason = Reason.STATE_PRUNED

    def __init__(self, root: bytes, horizon: int) -> None:
        self.root = root
        self.horizon = horizon
        super().__init__(
            f"state root {root.hex()[:16]} is not kept by this node: the trees of blocks before {horizon} are "
            "collected (--state-history); read at the head, or ask an archive node (--state-history all)"
        )


class DataCorrupted(ChainError):
    """The store failed an integrity check while serving: what was read is not what was written.

    Reason code DATA_CORRUPTED; gRPC DATA_LOSS, HTTP 503 (docs/operations.md). The node answers nothing
    more from that store and goes NOT_SERVING."""

    reason = Reason.DATA_CORRUPTED

    def __init__(self, problem: str) -> None:
        self.problem = problem
        super().__init__(f"store corrupted: {problem}")


class StoreRefused(ConfigError, InvariantBroken):
    """The store on disk cannot be used as it is (damaged, foreign, missing): refused at start-up.

    `problem` says what is wrong, `remedy` what to do; `chain-node` prints both on one line and exits 2
    (CONFIG_EXIT_STATUS)."""

    def __init__(self, path: str, problem: str, remedy: str) -> None:
        self.path = path
        self.problem = problem
        self.remedy = remedy
        super().__init__(f"{path}: {problem}; {remedy}")
