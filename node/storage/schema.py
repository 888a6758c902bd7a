"""Every storage key is built here, and nowhere else.

A key is one prefix byte naming the entity, then its components: fixed-width
identifiers, big-endian integers, and length-prefixed variable parts (ref
names), so that each list query is an ordered prefix scan and a page cursor is
simply the next key. Prefixes below 0x40 are public state: they (and only
they) are committed to the sparse Merkle tree, and their keys are what
GetOperationProof takes. See docs/state.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import IntEnum
from typing import Final

U64_MAX: Final = (1 << 64) - 1


class Prefix(IntEnum):
    # ---- public state (in the Merkle tree) ----
    ACCOUNT = 0x01
    CUSTODY_KEY = 0x02
    SIGNER = 0x03
    PROJECT = 0x04
    REF = 0x05
    COMMIT = 0x06
    COLLABORATOR = 0x07
    MERGE_REQUEST = 0x08
    VERIFICATION = 0x09
    LINK = 0x0A
    REACTION = 0x0B
    STORAGE_GRANT = 0x0C
    STORAGE_GRANT_INDEX = 0x0D
    TOMBSTONE = 0x0E
    LWW_STAMP = 0x0F
    PROJECT_NAME = 0x10
    COMMIT_SEQUENCE = 0x11  # a project that has pruned commits: the last commit sequence handed out
    # ---- secondary indexes (derived, not in the tree) ----
    PROJECTS_BY_OWNER = 0x40
    PROJECTS_BY_NAME = 0x41
    COMMITS_BY_SEQUENCE = 0x42
    REF_LOG = 0x43
    MERGE_REQUESTS_BY_REQUESTER = 0x44
    LINKS_BY_TARGET = 0x45
    REACTIONS_BY_TARGET = 0x46
    PROJECT_ACTIVITY = 0x47
    ACCOUNT_ACTIVITY = 0x48
    LIVE_PROJECTS = 0x49
    # ---- chain data (not in the tree) ----
    BLOCK = 0x60
    MESSAGE = 0x61
    EVENT = 0x62
    TREE_ROOT = 0x63  # where a state root's tree node is stored (node/storage/tree_layout.py)
    META = 0x70


TREE_PREFIX_LIMIT: Final = 0x40


def in_tree(key: bytes) -> bool:
    """Whether a key is public state, committed to the Merkle tree."""
    return key[0] < TREE_PREFIX_LIMIT


def tree_writes(writes: Mapping[bytes, bytes | None]) -> dict[bytes, bytes | None]:
    """The writes (None: a delete) to keys that are public state: what a block changes in the tree
    (`in_tree` inlined: this runs over every write of every block)."""
    limit = TREE_PREFIX_LIMIT
    return {k: v for k, v in writes.items() if k[0] < limit}


class LwwEntity(IntEnum):
    PROJECT = 1
    ACCOUNT = 2


class LinkTarget(IntEnum):
    ACCOUNT = 1
    PROJECT = 2


def u64(n: int) -> bytes:
    return n.to_bytes(8, "big")


def inverted_u64(n: int) -> bytes:
    """Big-endian of U64_MAX - n: ascending key order is descending n (newest first)."""
    return (U64_MAX - n).to_bytes(8, "big")


def ref_component(name: bytes) -> bytes:
    return bytes([len(name)]) + name


# Each prefix's key byte as a module constant, which the key builders below start from: reading an IntEnum
# member costs ~140 ns on Python 3.11 and a generic `prefix + b"".join(parts)` builder ~150 more, against ~30
# for a concatenation, and a key is built for every record read or written.
# tests/node/state/test_seal_fast_path.py checks every constant against its `Prefix`.
_ACCOUNT: Final = bytes([Prefix.ACCOUNT])
_CUSTODY_KEY: Final = bytes([Prefix.CUSTODY_KEY])
_SIGNER: Final = bytes([Prefix.SIGNER])
_PROJECT: Final = bytes([Prefix.PROJECT])
_REF: Final = bytes([Prefix.REF])
_COMMIT: Final = bytes([Prefix.COMMIT])
_COLLABORATOR: Final = bytes([Prefix.COLLABORATOR])
_MERGE_REQUEST: Final = bytes([Prefix.MERGE_REQUEST])
_VERIFICATION: Final = bytes([Prefix.VERIFICATION])
_LINK: Final = bytes([Prefix.LINK])
_REACTION: Final = bytes([Prefix.REACTION])
_STORAGE_GRANT: Final = bytes([Prefix.STORAGE_GRANT])
_STORAGE_GRANT_INDEX: Final = bytes([Prefix.STORAGE_GRANT_INDEX])
_TOMBSTONE: Final = bytes([Prefix.TOMBSTONE])
_LWW_STAMP: Final = bytes([Prefix.LWW_STAMP])
_PROJECT_NAME: Final = bytes([Prefix.PROJECT_NAME])
_COMMIT_SEQUENCE: Final = bytes([Prefix.COMMIT_SEQUENCE])
_PROJECTS_BY_OWNER: Final = bytes([Prefix.PROJECTS_BY_OWNER])
_PROJECTS_BY_NAME: Final = bytes([Prefix.PROJECTS_BY_NAME])
_COMMITS_BY_SEQUENCE: Final = bytes([Prefix.COMMITS_BY_SEQUENCE])
_REF_LOG: Final = bytes([Prefix.REF_LOG])
_MERGE_REQUESTS_BY_REQUESTER: Final = bytes([Prefix.MERGE_REQUESTS_BY_REQUESTER])
_LINKS_BY_TARGET: Final = bytes([Prefix.LINKS_BY_TARGET])
_REACTIONS_BY_TARGET: Final = bytes([Prefix.REACTIONS_BY_TARGET])
_PROJECT_ACTIVITY: Final = bytes([Prefix.PROJECT_ACTIVITY])
_ACCOUNT_ACTIVITY: Final = bytes([Prefix.ACCOUNT_ACTIVITY])
_LIVE_PROJECTS: Final = bytes([Prefix.LIVE_PROJECTS])
_BLOCK: Final = bytes([Prefix.BLOCK])
_MESSAGE: Final = bytes([Prefix.MESSAGE])
_EVENT: Final = bytes([Prefix.EVENT])
_TREE_ROOT: Final = bytes([Prefix.TREE_ROOT])
_META: Final = bytes([Prefix.META])


# ---- public state ----
def account_key(owner: bytes) -> bytes:
    return _ACCOUNT + owner


def custody_key_key(owner: bytes, key_id: bytes) -> bytes:
    return _CUSTODY_KEY + owner + key_id


def custody_keys_prefix(owner: bytes) -> bytes:
    return _CUSTODY_KEY + owner


def signer_key(owner: bytes, public_key: bytes) -> bytes:
    return _SIGNER + owner + public_key


def signers_prefix(owner: bytes) -> bytes:
    return _SIGNER + owner


def project_key(project_id: bytes) -> bytes:
    return _PROJECT + project_id


def project_name_key(owner: bytes, name: str) -> bytes:
    return _PROJECT_NAME + owner + name.lower().encode()


def ref_key(project_id: bytes, name: bytes) -> bytes:
    return _REF + project_id + ref_component(name)


def refs_prefix(project_id: bytes) -> bytes:
    return _REF + project_id


def commit_key(project_id: bytes, commit_hash: bytes) -> bytes:
    return _COMMIT + project_id + commit_hash


def commit_sequence_key(project_id: bytes) -> bytes:
    """The last commit sequence a project handed out (u64), once it has pruned commits: its commit count no
    longer says (node/state/handlers/pruning.py)."""
    return _COMMIT_SEQUENCE + project_id


def collaborator_key(project_id: bytes, address: bytes) -> bytes:
    return _COLLABORATOR + project_id + address


def collaborators_prefix(project_id: bytes) -> bytes:
    return _COLLABORATOR + project_id


def merge_request_key(target_project_id: bytes, request_id: bytes) -> bytes:
    return _MERGE_REQUEST + target_project_id + request_id


def merge_requests_prefix(target_project_id: bytes) -> bytes:
    return _MERGE_REQUEST + target_project_id


def verification_key(owner: bytes, address: bytes) -> bytes:
    return _VERIFICATION + owner + address


def verifications_prefix(owner: bytes) -> bytes:
    return _VERIFICATION + owner


def link_key(owner: bytes, target_kind: LinkTarget, target: bytes) -> bytes:
    return _LINK + owner + bytes([target_kind]) + target


def links_prefix(owner: bytes, target_kind: LinkTarget | None = None) -> bytes:
    if target_kind is None:
        return _LINK + owner
    return _LINK + owner + bytes([target_kind])


def reaction_key(owner: bytes, reaction_type: int, project_id: bytes, commit_hash: bytes) -> bytes:
    return _REACTION + owner + bytes([reaction_type]) + project_id + commit_hash


def reactions_prefix(owner: bytes) -> bytes:
    return _REACTION + owner


def storage_grant_key(owner: bytes, grant_id: bytes) -> bytes:
    return _STORAGE_GRANT + owner + grant_id


def storage_grant_index_key(owner: bytes) -> bytes:
    return _STORAGE_GRANT_INDEX + owner


def tombstone_key(element_key: bytes) -> bytes:
    return _TOMBSTONE + element_key


def lww_stamp_key(entity: LwwEntity, entity_id: bytes, field: int) -> bytes:
    return _LWW_STAMP + bytes([entity]) + entity_id + bytes([field])


# ---- secondary indexes ----
def project_by_owner_key(owner: bytes, project_id: bytes) -> bytes:
    return _PROJECTS_BY_OWNER + owner + project_id


def projects_by_owner_prefix(owner: bytes) -> bytes:
    return _PROJECTS_BY_OWNER + owner


def project_by_name_key(name: str, project_id: bytes) -> bytes:
    return _PROJECTS_BY_NAME + name.lower().encode() + b"\x00" + project_id


def projects_by_name_prefix(name_prefix: str) -> bytes:
    return _PROJECTS_BY_NAME + name_prefix.lower().encode()


def live_project_key(project_id: bytes) -> bytes:
    return _LIVE_PROJECTS + project_id


def live_projects_prefix() -> bytes:
    return _LIVE_PROJECTS


def commit_by_sequence_key(project_id: bytes, sequence: int) -> bytes:
    return _COMMITS_BY_SEQUENCE + project_id + inverted_u64(sequence)


def commits_by_sequence_prefix(project_id: bytes) -> bytes:
    return _COMMITS_BY_SEQUENCE + project_id


def ref_log_key(project_id: bytes, name: bytes, event_id: int) -> bytes:
    return _REF_LOG + project_id + ref_component(name) + inverted_u64(event_id)


def ref_log_prefix(project_id: bytes, name: bytes) -> bytes:
    return _REF_LOG + project_id + ref_component(name)


def merge_request_by_requester_key(owner: bytes, request_id: bytes) -> bytes:
    return _MERGE_REQUESTS_BY_REQUESTER + owner + request_id


def merge_requests_by_requester_prefix(owner: bytes) -> bytes:
    return _MERGE_REQUESTS_BY_REQUESTER + owner


def link_by_target_key(target_kind: LinkTarget, target: bytes, owner: bytes) -> bytes:
    return _LINKS_BY_TARGET + bytes([target_kind]) + target + owner


def links_by_target_prefix(target_kind: LinkTarget, target: bytes) -> bytes:
    return _LINKS_BY_TARGET + bytes([target_kind]) + target


def reaction_by_target_key(project_id: bytes, commit_hash: bytes, owner: bytes, reaction_type: int) -> bytes:
    return _REACTIONS_BY_TARGET + project_id + commit_hash + owner + bytes([reaction_type])


def reactions_by_target_prefix(project_id: bytes, commit_hash: bytes) -> bytes:
    return _REACTIONS_BY_TARGET + project_id + commit_hash


def project_activity_key(project_id: bytes, event_id: int) -> bytes:
    return _PROJECT_ACTIVITY + project_id + inverted_u64(event_id)


def project_activity_prefix(project_id: bytes) -> bytes:
    return _PROJECT_ACTIVITY + project_id


def account_activity_key(owner: bytes, event_id: int) -> bytes:
    return _ACCOUNT_ACTIVITY + owner + inverted_u64(event_id)


def account_activity_prefix(owner: bytes) -> bytes:
    return _ACCOUNT_ACTIVITY + owner


# ---- chain data ----
def block_key(number: int) -> bytes:
    return _BLOCK + u64(number)


def blocks_prefix() -> bytes:
    return _BLOCK


def message_key(message_hash: bytes) -> bytes:
    return _MESSAGE + message_hash


def event_key(event_id: int) -> bytes:
    """Committed messages in commit order: event id -> message hash (stream history)."""
    return _EVENT + u64(event_id)


def events_prefix() -> bytes:
    return _EVENT


def tree_root_key(root: bytes) -> bytes:
    """A state root -> the location (u64) of its tree node: where every walk from that root starts."""
    return _TREE_ROOT + root


def tree_node_key(location: bytes, node_hash: bytes) -> bytes:
    """A tree node in the `nodes` database: the number of the block that stored it (`location`, its u64),
    then its hash, so that each block's nodes are appended at the end of the B-tree
    (node/storage/tree_layout.py)."""
    return location + node_hash


STALE_ROOT_RECORD: Final = b"\x00"  # a stale entry's kind: the location record of a replaced root
STALE_TREE_NODE: Final = b"\x01"  # a stale entry's kind: a replaced tree node


def stale_key(since: int, kind: bytes, location: bytes, node_hash: bytes) -> bytes:
    """What block `since` replaced, in the `stale` database: the block's number first, so the index is
    appended in block order and collecting everything stale since a block or earlier is a scan from its start
    (node/storage/retention.py); then the kind, so a block's replaced root record is collected before any of
    its nodes; then where the node is stored (`tree_node_key`) and its hash."""
    return u64(since) + kind + location + node_hash


def meta_key(name: str) -> bytes:
    return _META + name.encode()


META_HEAD: Final = "head"
META_STATS: Final = "stats"
META_GENESIS: Final = "genesis"
META_PRUNED: Final = "pruned"
"""The newest block whose stale entries the collector has reached (u64). Once it is set, a walk from a root that
has no location record raises StatePruned: that root's tree is not kept (node/storage/retention.py)."""
META_IDENTITY: Final = "identity"
"""What the store is (format version, network, genesis hash): node.storage.identity."""
