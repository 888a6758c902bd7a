"""The public state keys a client asks proofs for (`get_operation_proof(key=...)`, `get_exclusion_proof`).

A key is one prefix byte naming the entity, then its components (docs/state.md): 20-byte addresses,
32-byte ids and hashes, and ref names prefixed with their length. These are the same bytes the node's
store builds (node.storage.schema; tests/node/sdk/test_statekeys.py compares every builder), given here
so that a client needs none of the node's storage code.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Final


class StatePrefix(IntEnum):
    """The first byte of each kind of public state key."""

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
    PROJECT_NAME = 0x10


class LinkTarget(IntEnum):
    """What a link points at, as its key spells it."""

    ACCOUNT = 1
    PROJECT = 2


REACTION_LIKE: Final = 1  # ReactionType.REACTION_TYPE_LIKE


def _p(prefix: StatePrefix) -> bytes:
    return bytes([prefix])


def account_key(owner: bytes) -> bytes:
    """An account's row (its Account record)."""
    return _p(StatePrefix.ACCOUNT) + owner


def custody_key_key(owner: bytes, key_id: bytes) -> bytes:
    """One custody key of an account (key_id: the key's 20-byte address)."""
    return _p(StatePrefix.CUSTODY_KEY) + owner + key_id


def signer_key(owner: bytes, public_key: bytes) -> bytes:
    """One delegated (Ed25519) signer of an account."""
    return _p(StatePrefix.SIGNER) + owner + public_key


def project_key(project_id: bytes) -> bytes:
    """A project's row."""
    return _p(StatePrefix.PROJECT) + project_id


def project_name_key(owner: bytes, name: str) -> bytes:
    """An owner's project name (case-insensitive) -> the project id."""
    return _p(StatePrefix.PROJECT_NAME) + owner + name.lower().encode()


def ref_key(project_id: bytes, name: bytes) -> bytes:
    """A ref of a project (name: the ref's bytes, e.g. b"refs/heads/main")."""
    return _p(StatePrefix.REF) + project_id + bytes([len(name)]) + name


def commit_key(project_id: bytes, commit_hash: bytes) -> bytes:
    """A commit of a project."""
    return _p(StatePrefix.COMMIT) + project_id + commit_hash


def collaborator_key(project_id: bytes, address: bytes) -> bytes:
    """A collaborator of a project."""
    return _p(StatePrefix.COLLABORATOR) + project_id + address


def merge_request_key(target_project_id: bytes, request_id: bytes) -> bytes:
    """An active merge request of a project."""
    return _p(StatePrefix.MERGE_REQUEST) + target_project_id + request_id


def verification_key(owner: bytes, address: bytes) -> bytes:
    """A verified external address of an account."""
    return _p(StatePrefix.VERIFICATION) + owner + address


def link_key(owner: bytes, target_kind: LinkTarget, target: bytes) -> bytes:
    """A link (follow or star) from an account to an account or a project."""
    return _p(StatePrefix.LINK) + owner + bytes([target_kind]) + target


def reaction_key(owner: bytes, reaction_type: int, project_id: bytes, commit_hash: bytes) -> bytes:
    """A reaction of an account on a commit (reaction_type: REACTION_LIKE)."""
    return _p(StatePrefix.REACTION) + owner + bytes([reaction_type]) + project_id + commit_hash


def storage_grant_key(owner: bytes, grant_id: bytes) -> bytes:
    """One storage grant of an account."""
    return _p(StatePrefix.STORAGE_GRANT) + owner + grant_id


def storage_grant_index_key(owner: bytes) -> bytes:
    """The list of an account's storage grant ids."""
    return _p(StatePrefix.STORAGE_GRANT_INDEX) + owner


def tombstone_key(element_key: bytes) -> bytes:
    """The tombstone of a removed element (its key: one of the keys above)."""
    return _p(StatePrefix.TOMBSTONE) + element_key
