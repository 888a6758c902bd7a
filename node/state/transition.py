"""The state transition: pure and deterministic.

    build_block / apply_block
      -> execute            (every message on its own rollback-able overlay)
        -> apply_message    (structure, time, replay, authorization, handler)
      -> finish             (message records, indexes, stats, tree root, header)

No clock, I/O or randomness: the block's timestamp is the only time, state is
read through a ReadView and every write lands in an Overlay that the caller
commits in one storage transaction. An invalid message is dropped with its
typed reason and never halts a block; a block whose header does not match
what applying it produced raises InvalidBlock.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from chain.v1 import block_pb2
from chain.v1 import message_pb2 as pb
from node import merkle
from node.block import block_messages, genesis_block, header_hash, make_chunks, message_root
from node.codec import check_envelope
from node.constants import (
    MAX_BLOCK_MESSAGES,
    MAX_BLOCK_MESSAGES_PER_PROJECT,
    MAX_FUTURE_DRIFT,
    MAX_QUOTA_MESSAGE_AGE,
    PROTOCOL_VERSION,
)
from node.crypto.ed25519 import Ed25519Verifier
from node.errors import InvalidBlock, InvariantBroken, MessageRejected, Reason
from node.state.access import StateAccess, encode
from node.state.authz import authorize_signer
from node.state.context import MessageContext
from node.state.handlers import accounts, git, projects, social
from node.state.kinds import project_of
from node.state.params import ChainParams
from node.state.structural import validate_structure
from node.storage import schema
from node.storage.kv import DictView, Overlay, ReadView

HANDLERS: dict[str, Callable[[MessageContext, Any], None]] = {
    "project_create": projects.project_create,
    "project_metadata": projects.project_metadata,
    "project_archive": projects.project_archive,
    "project_remove": projects.project_remove,
    "fork": projects.fork,
    "collaborator_add": projects.collaborator_add,
    "collaborator_remove": projects.collaborator_remove,
    "merge_request_add": projects.merge_request_add,
    "merge_request_remove": projects.merge_request_remove,
    "ref_update": git.ref_update,
    "ref_delete": git.ref_delete,
    "commit_bundle": git.commit_bundle,
    "account_data": accounts.account_data,
    "signer_add": accounts.signer_add,
    "signer_remove": accounts.signer_remove,
    "keychain_authorize": accounts.keychain_authorize,
    "keychain_revoke": accounts.keychain_revoke,
    "verification_add": accounts.verification_add,
    "verification_remove": accounts.verification_remove,
    "storage_grant": accounts.storage_grant,
    "link_add": social.link_add,
    "link_remove": social.link_remove,
    "reaction_add": social.reaction_add,
    "reaction_remove": social.reaction_remove,
}


@dataclass(frozen=True)
class Dropped:
    hash: bytes
    error: MessageRejected


@dataclass
class BlockOutput:
    block: block_pb2.Block
    writes: Mapping[bytes, bytes | None]
    tree_nodes: dict[bytes, bytes]
    applied: list[block_pb2.CommittedMessage] = field(default_factory=list)
    dropped: list[Dropped] = field(default_factory=list)


def check_time(kind_quota: bool, timestamp: int, now: int) -> None:
    if timestamp > now + MAX_FUTURE_DRIFT:
        raise MessageRejected(
            Reason.FUTURE_TIMESTAMP,
            f"timestamp is more than {MAX_FUTURE_DRIFT} s ahead of block time",
            timestamp=timestamp,
            now=now,
        )
    if kind_quota and timestamp + MAX_QUOTA_MESSAGE_AGE < now:
        raise MessageRejected(
            Reason.STALE_TIMESTAMP,
            f"quota-affecting message more than {MAX_QUOTA_MESSAGE_AGE} s old",
            timestamp=timestamp,
            now=now,
        )


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
    kind = validate_structure(msg.data, params.network)
    if verifier is not None:
        check_envelope(msg, verifier)
    check_time(kind.quota, msg.data.timestamp, now)
    child = parent.child()
    st = StateAccess(child)
    if st.message_seen(msg.hash):
        raise MessageRejected(Reason.DUPLICATE_MESSAGE, "message already committed", hash=msg.hash.hex())
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
    HANDLERS[kind.body](ctx, getattr(msg.data, kind.body))
    child.fold_into(parent)


def execute(
    overlay: Overlay,
    params: ChainParams,
    messages: Sequence[pb.Message],
    *,
    block_number: int,
    now: int,
    first_event_id: int,
    verifier: Ed25519Verifier | None,
) -> tuple[list[block_pb2.CommittedMessage], list[Dropped]]:
    applied: list[block_pb2.CommittedMessage] = []
    dropped: list[Dropped] = []
    seen: set[bytes] = set()
    per_project: Counter[bytes] = Counter()
    for msg in messages:
        event_id = first_event_id + len(applied)
        project = project_of(msg.data, msg.hash)
        try:
            if msg.hash in seen:
                raise MessageRejected(Reason.DUPLICATE_MESSAGE, "message repeated in the block")
            if len(applied) >= MAX_BLOCK_MESSAGES:
                raise MessageRejected(Reason.LIMIT_EXCEEDED, "block is full", limit=MAX_BLOCK_MESSAGES)
            if project and per_project[project] >= MAX_BLOCK_MESSAGES_PER_PROJECT:
                raise MessageRejected(
                    Reason.LIMIT_EXCEEDED, "block holds the project's maximum", limit=MAX_BLOCK_MESSAGES_PER_PROJECT
                )
            apply_message(
                overlay, params, msg, block_number=block_number, now=now, event_id=event_id, verifier=verifier
            )
        except MessageRejected as exc:
            dropped.append(Dropped(bytes(msg.hash), exc))
            continue
        seen.add(bytes(msg.hash))
        if project:
            per_project[project] += 1
        record = block_pb2.CommittedMessage(
            message=msg, block_number=block_number, index=len(applied), event_id=event_id
        )
        applied.append(record)
        _record_message(overlay, record)
    return applied, dropped


def _record_message(overlay: Overlay, record: block_pb2.CommittedMessage) -> None:
    msg = record.message
    overlay.put(schema.message_key(msg.hash), encode(record))
    overlay.put(schema.event_key(record.event_id), msg.hash)
    overlay.put(schema.account_activity_key(msg.data.owner_address, record.event_id), msg.hash)
    project = project_of(msg.data, msg.hash)
    if project:
        overlay.put(schema.project_activity_key(project, record.event_id), msg.hash)


def _finish(
    base: ReadView,
    nodes: merkle.NodeStore,
    overlay: Overlay,
    parent: block_pb2.Block,
    applied: list[block_pb2.CommittedMessage],
    header: block_pb2.BlockHeader,
) -> tuple[bytes, dict[bytes, bytes]]:
    """Stats, head and block records; returns the new state root and tree nodes."""
    st = StateAccess(overlay)
    stats = st.stats()
    stats.total_blocks = header.number + 1
    stats.total_messages += len(applied)
    stats.total_projects += sum(
        1 for r in applied if r.message.data.type in (pb.MESSAGE_TYPE_PROJECT_CREATE, pb.MESSAGE_TYPE_FORK)
    )
    changes = {k: v for k, v in overlay.writes.items() if schema.in_tree(k)}
    stats.total_accounts += sum(
        1 for k, v in changes.items() if k[0] == schema.Prefix.ACCOUNT and v is not None and base.get(k) is None
    )
    st.store(schema.meta_key(schema.META_STATS), stats)
    result = merkle.update(nodes, parent.header.state_root, changes)
    return result.root, result.new_nodes


def _store_block(overlay: Overlay, block: block_pb2.Block) -> None:
    overlay.put(schema.block_key(block.header.number), encode(block))
    overlay.put(schema.meta_key(schema.META_HEAD), encode(block_pb2.Block(header=block.header, hash=block.hash)))


def _parent(st: StateAccess) -> block_pb2.Block:
    head = st.head()
    if head is None:
        raise InvariantBroken("the store has no genesis block")
    return head


def build_block(
    base: ReadView,
    nodes: merkle.NodeStore,
    params: ChainParams,
    timestamp_ms: int,
    candidates: Sequence[pb.Message],
    *,
    verifier: Ed25519Verifier | None = None,
) -> BlockOutput:
    """Propose the next block from candidate messages; invalid ones are left out."""
    overlay = Overlay(base)
    st = StateAccess(overlay)
    parent = _parent(st)
    number = parent.header.number + 1
    timestamp_ms = max(timestamp_ms, parent.header.timestamp_ms)
    applied, dropped = execute(
        overlay,
        params,
        candidates,
        block_number=number,
        now=timestamp_ms // 1000,
        first_event_id=st.stats().total_messages + 1,
        verifier=verifier,
    )
    messages = [r.message for r in applied]
    chunks = make_chunks(messages)
    header = block_pb2.BlockHeader(
        number=number,
        parent_hash=parent.hash,
        timestamp_ms=timestamp_ms,
        message_root=message_root([m.hash for m in messages]),
        message_count=len(messages),
        chunk_hashes=[c.chunk_hash for c in chunks],
        network=params.network,
        protocol_version=PROTOCOL_VERSION,
    )
    header.state_root, tree_nodes = _finish(base, nodes, overlay, parent, applied, header)
    block = block_pb2.Block(header=header, hash=header_hash(header), chunks=chunks)
    _store_block(overlay, block)
    return BlockOutput(block=block, writes=overlay.writes, tree_nodes=tree_nodes, applied=applied, dropped=dropped)


def apply_block(
    base: ReadView,
    nodes: merkle.NodeStore,
    params: ChainParams,
    block: block_pb2.Block,
    *,
    verifier: Ed25519Verifier | None = None,
) -> BlockOutput:
    """Apply a block proposed elsewhere and check that it reproduces its header."""
    overlay = Overlay(base)
    st = StateAccess(overlay)
    parent = _parent(st)
    h = block.header
    number = parent.header.number + 1

    def expect(what: str, expected: object, got: object) -> None:
        if expected != got:
            raise InvalidBlock(h.number, what, str(expected), str(got))

    expect("number", number, h.number)
    expect("parent_hash", parent.hash.hex(), h.parent_hash.hex())
    expect("hash", header_hash(h).hex(), block.hash.hex())
    expect("network", params.network, h.network)
    if h.timestamp_ms < parent.header.timestamp_ms:
        raise InvalidBlock(h.number, "timestamp_ms", f">= {parent.header.timestamp_ms}", str(h.timestamp_ms))
    messages = block_messages(block)
    if len(messages) > MAX_BLOCK_MESSAGES:
        raise InvalidBlock(h.number, "message_count", f"<= {MAX_BLOCK_MESSAGES}", str(len(messages)))
    busiest = Counter(project_of(m.data, m.hash) for m in messages if project_of(m.data, m.hash))
    if busiest and max(busiest.values()) > MAX_BLOCK_MESSAGES_PER_PROJECT:
        raise InvalidBlock(
            h.number, "messages per project", f"<= {MAX_BLOCK_MESSAGES_PER_PROJECT}", str(max(busiest.values()))
        )
    expect("chunk_hashes", [c.chunk_hash for c in make_chunks(messages)], list(h.chunk_hashes))
    expect("message_root", message_root([m.hash for m in messages]).hex(), h.message_root.hex())
    applied, dropped = execute(
        overlay,
        params,
        messages,
        block_number=number,
        now=h.timestamp_ms // 1000,
        first_event_id=st.stats().total_messages + 1,
        verifier=verifier,
    )
    expect("message_count", h.message_count, len(applied))
    root, tree_nodes = _finish(base, nodes, overlay, parent, applied, h)
    expect("state_root", h.state_root.hex(), root.hex())
    _store_block(overlay, block)
    return BlockOutput(block=block, writes=overlay.writes, tree_nodes=tree_nodes, applied=applied, dropped=dropped)


def genesis_writes(params: ChainParams) -> dict[bytes, bytes | None]:
    """What an empty store gets before its first block: the genesis block and parameters."""
    overlay = Overlay(DictView())
    _store_block(overlay, genesis_block(params))
    overlay.put(schema.meta_key(schema.META_GENESIS), json.dumps(params.to_json(), sort_keys=True).encode())
    return dict(overlay.writes)
