"""The state transition: pure and deterministic, written to be read top to bottom.

    build_block(candidates)                 apply_block(block)
      start_block                             start_block
                                              validate_header, validate_messages
      apply_body                              apply_body
        append_message: block limits, then
        apply_message: registry kind, structure, envelope, time, replay, signer, handler
      seal_block: header, finish_block        finish_block
                                              check_result   (count and state root against the header)
      record_block                            record_block   (block and head records, BlockOutput)

    apply_write_set(block, writes): a block applied by its leader's write set (node/state/writeset.py):
      start_block, validate_header, validate_messages; the writes taken, each message's records made,
      finish_block, check_result, record_block (no message executed)

No clock, I/O or randomness: the block's timestamp is the only time, state is
read through a ReadView and every write lands in an Overlay that the caller
commits in one storage transaction. The state tree is updated through the one
`merkle.TreeUpdater` the caller hands in: where that update runs (this process,
the store's writer process) is the caller's choice and changes no result. An invalid message is dropped with its
typed reason and never halts a block; a block whose header does not match
what applying it produced raises InvalidBlock. What each message type is
(body check, signer scope, time rule, handler) is node/state/registry.py.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from chain.v1 import block_pb2
from chain.v1 import message_pb2 as pb
from node import merkle
from node.block import block_messages, chunk_hashes, fill_chunks, genesis_block, header_hash, message_root
from node.codec import check_envelope
from node.constants import MAX_BLOCK_MESSAGES, MAX_BLOCK_MESSAGES_PER_PROJECT, MAX_FUTURE_DRIFT, PROTOCOL_VERSION
from node.crypto.ed25519 import Ed25519Verifier
from node.errors import InvalidBlock, InvariantBroken, MessageRejected, Reason
from node.merkle.codec import UNPLACED
from node.params import ChainParams
from node.state.access import StateAccess, encode
from node.state.authz import authorize_signer
from node.state.context import MessageContext
from node.state.kinds import project_of
from node.state.registry import REGISTRY
from node.state.structural import validate_structure
from node.storage import chainlog, schema
from node.storage.kv import DictView, MemoView, Overlay, ReadView


@dataclass(frozen=True)
class Dropped:
    hash: bytes
    error: MessageRejected


@dataclass
class BlockOutput:
    block: block_pb2.Block
    writes: Mapping[bytes, bytes | None]
    tree_nodes: merkle.BlockNodes  # placed here, or held where the update ran (the store's writer process)
    applied: list[block_pb2.CommittedMessage] = field(default_factory=list)
    dropped: list[Dropped] = field(default_factory=list)


@dataclass(frozen=True)
class BlockStart:
    """What building and applying a block both begin from."""

    base: ReadView
    overlay: Overlay
    parent: block_pb2.Block
    number: int
    first_event_id: int


# ---------------------------------------------------------------- entry points
def build_block(
    base: ReadView,
    nodes: merkle.TreeUpdater,
    params: ChainParams,
    timestamp_ms: int,
    candidates: Sequence[pb.Message],
    *,
    verifier: Ed25519Verifier | None = None,
) -> BlockOutput:
    """Propose the next block from candidate messages; invalid ones are left out."""
    start = start_block(base)
    timestamp_ms = max(timestamp_ms, start.parent.header.timestamp_ms)
    body = apply_body(start, params, candidates, now=timestamp_ms // 1000, verifier=verifier)
    return seal_block(start, nodes, params, timestamp_ms, body)


def seal_block(
    start: BlockStart,
    nodes: merkle.TreeUpdater,
    params: ChainParams,
    timestamp_ms: int,
    body: BlockBody,
) -> BlockOutput:
    """The header over what `body` applied onto `start.overlay` (at block time `timestamp_ms // 1000`),
    the stats and state root, the block records: the one place a proposed block's header is made.

    `build_block` calls it; so does the node that validated its pending messages into an open block
    (node/server/write/pending.py) and commits that block without executing them again."""
    if timestamp_ms < start.parent.header.timestamp_ms:
        raise InvariantBroken(f"block time {timestamp_ms} is before its parent's {start.parent.header.timestamp_ms}")
    messages = body.messages
    chunks = chunk_hashes(messages)
    header = block_pb2.BlockHeader(
        number=start.number,
        parent_hash=start.parent.hash,
        timestamp_ms=timestamp_ms,
        message_root=message_root([m.hash for m in messages]),
        message_count=len(messages),
        chunk_hashes=chunks,
        network=params.network,
        protocol_version=PROTOCOL_VERSION,
    )
    header.state_root, tree_nodes = finish_block(start, nodes, messages, header)
    block = block_pb2.Block(header=header, hash=header_hash(header))
    fill_chunks(block, messages, chunks)  # each message copied once, into its chunk
    return record_block(start, block, tree_nodes, body.applied, body.dropped)


def apply_block(
    base: ReadView,
    nodes: merkle.TreeUpdater,
    params: ChainParams,
    block: block_pb2.Block,
    *,
    verifier: Ed25519Verifier | None = None,
) -> BlockOutput:
    """Apply a block proposed elsewhere and check that it reproduces its header."""
    start = start_block(base)
    validate_header(start.parent, params, block)
    messages = block_messages(block)
    validate_messages(block.header, messages)
    now = block.header.timestamp_ms // 1000
    body = apply_body(start, params, messages, now=now, verifier=verifier)
    root, tree_nodes = finish_block(start, nodes, body.messages, block.header)
    check_result(block.header, body.applied, root)
    return record_block(start, block, tree_nodes, body.applied, body.dropped)


def apply_write_set(
    base: ReadView,
    nodes: merkle.TreeUpdater,
    params: ChainParams,
    block: block_pb2.Block,
    writes: Mapping[bytes, bytes | None],
) -> BlockOutput:
    """Apply a block by the write set its leader's execution made (node/state/writeset.py) instead of
    executing its messages: the header and messages are checked as `apply_block` checks them, the handlers'
    writes are taken as they are, each message's records, the stats and the tree update are made here (the
    tree from the changed keys, never from nodes given), and the state root must be the header's. Every
    message of a block from the log was applied (a dropped one is never in a block): the records are theirs."""
    start = start_block(base)
    validate_header(start.parent, params, block)
    messages = block_messages(block)
    projects = [project_of(m.data, m.hash) for m in messages]
    validate_messages(block.header, messages, projects)
    _expect(block.header, "message_count", block.header.message_count, len(messages))
    _expect(block.header, "distinct messages", len(messages), len({bytes(m.hash) for m in messages}))
    overlay = start.overlay
    overlay.update(writes)
    applied: list[block_pb2.CommittedMessage] = []
    for index, msg in enumerate(messages):
        record = block_pb2.CommittedMessage(
            message=msg, block_number=start.number, index=index, event_id=start.first_event_id + index
        )
        applied.append(record)
        _record_message(overlay, record, projects[index])
    root, tree_nodes = finish_block(start, nodes, messages, block.header)
    check_result(block.header, applied, root)
    return record_block(start, block, tree_nodes, applied, [])


def genesis_writes(params: ChainParams) -> dict[bytes, bytes | None]:
    """What an empty store gets before its first block: the genesis block and parameters."""
    overlay = Overlay(DictView())
    _store_block(overlay, genesis_block(params), 1)
    overlay.put(schema.meta_key(schema.META_GENESIS), json.dumps(params.to_json(), sort_keys=True).encode())
    return dict(overlay.writes)


# ---------------------------------------------------------------- prologue
def start_block(base: ReadView) -> BlockStart:
    """The parent (the stored head), the new block's number and its first event id."""
    base = MemoView(base)  # the block's messages read the same records (signer, account, grants) again and again
    overlay = Overlay(base)
    st = StateAccess(overlay)
    parent = st.head()
    if parent is None:
        raise InvariantBroken("the store has no genesis block")
    return BlockStart(
        base=base,
        overlay=overlay,
        parent=parent,
        number=parent.header.number + 1,
        first_event_id=st.stats().total_messages + 1,
    )


# ---------------------------------------------------------------- header validation
def _expect(header: block_pb2.BlockHeader, what: str, expected: object, got: object) -> None:
    if expected != got:
        raise InvalidBlock(header.number, what, str(expected), str(got))


def validate_header(parent: block_pb2.Block, params: ChainParams, block: block_pb2.Block) -> None:
    """The header against its parent and the chain: number, links, hash, network, time."""
    h = block.header
    _expect(h, "number", parent.header.number + 1, h.number)
    _expect(h, "parent_hash", parent.hash.hex(), h.parent_hash.hex())
    _expect(h, "hash", header_hash(h).hex(), block.hash.hex())
    _expect(h, "network", params.network, h.network)
    if h.timestamp_ms < parent.header.timestamp_ms:
        raise InvalidBlock(h.number, "timestamp_ms", f">= {parent.header.timestamp_ms}", str(h.timestamp_ms))


def validate_messages(
    h: block_pb2.BlockHeader, messages: Sequence[pb.Message], projects: Sequence[bytes] | None = None
) -> None:
    """The block's messages against the header, before any runs: limits, chunks, message root. `projects`:
    each message's `project_of`, when the caller has them."""
    if len(messages) > MAX_BLOCK_MESSAGES:
        raise InvalidBlock(h.number, "message_count", f"<= {MAX_BLOCK_MESSAGES}", str(len(messages)))
    if projects is None:
        projects = [project_of(m.data, m.hash) for m in messages]
    busiest = Counter(p for p in projects if p)
    if busiest and max(busiest.values()) > MAX_BLOCK_MESSAGES_PER_PROJECT:
        raise InvalidBlock(
            h.number, "messages per project", f"<= {MAX_BLOCK_MESSAGES_PER_PROJECT}", str(max(busiest.values()))
        )
    _expect(h, "chunk_hashes", chunk_hashes(messages), list(h.chunk_hashes))
    _expect(h, "message_root", message_root([m.hash for m in messages]).hex(), h.message_root.hex())


# ---------------------------------------------------------------- body
@dataclass
class BlockBody:
    """What a block has applied so far: its records in order (and their messages, as admitted: reading them
    back out of the records would wrap each again), what it dropped, and what its limits count."""

    applied: list[block_pb2.CommittedMessage] = field(default_factory=list)
    messages: list[pb.Message] = field(default_factory=list)
    dropped: list[Dropped] = field(default_factory=list)
    seen: set[bytes] = field(default_factory=set)
    per_project: Counter[bytes] = field(default_factory=Counter)


def apply_body(
    start: BlockStart,
    params: ChainParams,
    messages: Sequence[pb.Message],
    *,
    now: int,
    verifier: Ed25519Verifier | None,
) -> BlockBody:
    """Apply each message in order; a rejected one is dropped with its reason and leaves no trace."""
    body = BlockBody()
    for msg in messages:
        try:
            append_message(
                start.overlay,
                params,
                body,
                msg,
                number=start.number,
                first_event_id=start.first_event_id,
                now=now,
                verifier=verifier,
            )
        except MessageRejected as exc:
            body.dropped.append(Dropped(bytes(msg.hash), exc))
    return body


def append_message(
    overlay: Overlay,
    params: ChainParams,
    body: BlockBody,
    msg: pb.Message,
    *,
    number: int,
    first_event_id: int,
    now: int,
    verifier: Ed25519Verifier | None,
) -> block_pb2.CommittedMessage:
    """One more message at the end of block `number` (time `now`, events from `first_event_id`): the block's
    limits, the message applied onto `overlay` and its records; on MessageRejected nothing changed."""
    event_id = first_event_id + len(body.applied)
    project = project_of(msg.data, msg.hash)
    check_room(msg, project, body.seen, len(body.applied), body.per_project)
    apply_message(overlay, params, msg, block_number=number, now=now, event_id=event_id, verifier=verifier)
    body.seen.add(bytes(msg.hash))
    if project:
        body.per_project[project] += 1
    record = block_pb2.CommittedMessage(message=msg, block_number=number, index=len(body.applied), event_id=event_id)
    body.applied.append(record)
    body.messages.append(msg)
    _record_message(overlay, record, project)
    return record


def check_room(msg: pb.Message, project: bytes, seen: set[bytes], count: int, per_project: Counter[bytes]) -> None:
    """Block-level limits on one more message: no repeat, block not full, project not at its share."""
    if msg.hash in seen:
        raise MessageRejected(Reason.DUPLICATE_MESSAGE, "message repeated in the block")
    if count >= MAX_BLOCK_MESSAGES:
        raise MessageRejected(Reason.LIMIT_EXCEEDED, "block is full", limit=MAX_BLOCK_MESSAGES)
    if project and per_project[project] >= MAX_BLOCK_MESSAGES_PER_PROJECT:
        raise MessageRejected(
            Reason.LIMIT_EXCEEDED, "block holds the project's maximum", limit=MAX_BLOCK_MESSAGES_PER_PROJECT
        )


def _record_message(overlay: Overlay, record: block_pb2.CommittedMessage, project: bytes) -> None:
    """The message's record and its indexes; `project` is `project_of` the message ("" when none)."""
    msg = record.message
    message_hash = msg.hash
    event_id = record.event_id
    chainlog.put_message(overlay, record)
    overlay.put(schema.account_activity_key(msg.data.owner_address, event_id), message_hash)
    if project:
        overlay.put(schema.project_activity_key(project, event_id), message_hash)


# ---------------------------------------------------------------- one message
def apply_message(
    parent: Overlay,
    params: ChainParams,
    msg: pb.Message,
    *,
    block_number: int,
    now: int,
    event_id: int,
    verifier: Ed25519Verifier | None = None,
) -> None:
    """Validate and apply one message onto `parent`; on rejection nothing is written.

    With a `verifier`, the envelope (canonical encoding, hash, Ed25519
    signature) is checked too; without one the caller vouches for it (the
    node verifies every message before it enters the mempool).
    """
    kind = REGISTRY.kind_of(int(msg.data.type))
    validate_structure(msg.data, kind, params.network)
    if verifier is not None:
        check_envelope(msg, verifier)
    check_time(kind.max_age, msg.data.timestamp, now)
    child = parent.child()
    st = StateAccess(child)
    check_not_committed(st, msg.hash)
    ctx = MessageContext(
        st=st,
        params=params,
        data=msg.data,
        message_hash=bytes(msg.hash),
        signer=bytes(msg.signer),
        block_number=block_number,
        event_id=event_id,
        now=now,
    )
    authorize_signer(ctx, kind)
    kind.handler(ctx, getattr(msg.data, kind.body))
    child.fold_into(parent)


def check_not_committed(st: StateAccess, message_hash: bytes) -> None:
    """A message is committed at most once."""
    if st.message_seen(message_hash):
        raise MessageRejected(Reason.DUPLICATE_MESSAGE, "message already committed", hash=message_hash.hex())


def check_time(max_age: int | None, timestamp: int, now: int) -> None:
    """Not too far ahead of the block time; not older than `max_age` (the kind's stale rule) when it has one."""
    if timestamp > now + MAX_FUTURE_DRIFT:
        raise MessageRejected(
            Reason.FUTURE_TIMESTAMP,
            f"timestamp is more than {MAX_FUTURE_DRIFT} s ahead of block time",
            timestamp=timestamp,
            now=now,
        )
    if max_age is not None and timestamp + max_age < now:
        raise MessageRejected(
            Reason.STALE_TIMESTAMP,
            f"quota-affecting message more than {max_age} s old",
            timestamp=timestamp,
            now=now,
        )


# ---------------------------------------------------------------- epilogue
def finish_block(
    start: BlockStart,
    nodes: merkle.TreeUpdater,
    messages: Sequence[pb.Message],
    header: block_pb2.BlockHeader,
) -> tuple[bytes, merkle.BlockNodes]:
    """Cumulative stats, then the new state root and the tree nodes it adds, made by `nodes` (in this process,
    or in the store's writer process, which holds them: the caller's choice, the same root either way)."""
    overlay = start.overlay
    st = StateAccess(overlay)
    stats = st.stats()
    stats.total_blocks = header.number + 1
    stats.total_messages += len(messages)
    creates = (pb.MESSAGE_TYPE_PROJECT_CREATE, pb.MESSAGE_TYPE_FORK)
    stats.total_projects += sum(1 for m in messages if m.data.type in creates)
    changes = schema.tree_writes(overlay.writes)
    account = int(schema.Prefix.ACCOUNT)
    base = start.base
    stats.total_accounts += sum(
        1 for k, v in changes.items() if k[0] == account and v is not None and base.get(k) is None
    )
    st.store(schema.meta_key(schema.META_STATS), stats)
    # the nodes the block makes are stored with it: tagged with its number, each internal node with where its
    # children are, and the new root's location recorded (node/storage/tree_layout.py)
    parent_root = start.parent.header.state_root
    root_at = base.get(schema.tree_root_key(parent_root)) or UNPLACED
    here = schema.u64(header.number)
    result = nodes.update_tree(parent_root, changes, here=here, root_at=root_at)
    if result.root_at is not None:
        overlay.put(schema.tree_root_key(result.root), result.root_at)
    return result.root, result.nodes


def check_result(h: block_pb2.BlockHeader, applied: Sequence[block_pb2.CommittedMessage], root: bytes) -> None:
    """What applying the block produced against what its header claims."""
    _expect(h, "message_count", h.message_count, len(applied))
    _expect(h, "state_root", h.state_root.hex(), root.hex())


def record_block(
    start: BlockStart,
    block: block_pb2.Block,
    tree_nodes: merkle.BlockNodes,
    applied: list[block_pb2.CommittedMessage],
    dropped: list[Dropped],
) -> BlockOutput:
    """The block and head records; what the caller commits."""
    _store_block(start.overlay, block, start.first_event_id)
    return BlockOutput(
        block=block, writes=start.overlay.writes, tree_nodes=tree_nodes, applied=applied, dropped=dropped
    )


def _store_block(overlay: Overlay, block: block_pb2.Block, first_event_id: int) -> None:
    overlay.put(schema.block_key(block.header.number), chainlog.block_value(block, first_event_id))
    overlay.put(schema.meta_key(schema.META_HEAD), encode(block_pb2.Block(header=block.header, hash=block.hash)))
