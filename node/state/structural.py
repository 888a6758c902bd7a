"""Stateless (structural) validation of MessageData: shape, sizes, enums.

Runs before any state is read, once the registry (node/state/registry.py) has
named the message's kind. Every rejection is a MessageRejected with a stable
reason code.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from chain.v1 import message_pb2 as pb
from node import constants as C
from node.errors import MessageRejected, Reason
from node.state.kinds import MessageKind

PROJECT_NAME_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,99}$")


def bad(field: str, detail: str, **values: Any) -> MessageRejected:
    return MessageRejected(Reason.INVALID_FIELD, f"{field}: {detail}", field=field, **values)


def need_len(field: str, value: bytes, length: int) -> None:
    if len(value) != length:
        raise bad(field, f"must be {length} bytes, got {len(value)}", got=len(value))


def need_max(field: str, value: str | bytes, limit: int) -> None:
    if len(value) > limit:
        raise bad(field, f"longer than {limit}", got=len(value))


def need_ref_name(field: str, name: bytes) -> None:
    if not 1 <= len(name) <= C.MAX_REF_NAME_LEN:
        raise bad(field, f"must be 1-{C.MAX_REF_NAME_LEN} bytes", got=len(name))
    if b"\x00" in name:
        raise bad(field, "must not contain NUL")


def need_project_name(field: str, name: str) -> None:
    if not PROJECT_NAME_RE.match(name) or name in (".", ".."):
        raise bad(field, "1-100 of A-Z a-z 0-9 . _ - , not starting with . or -")


def need_unique(field: str, values: Sequence[bytes]) -> None:
    if len(set(values)) != len(values):
        raise bad(field, "duplicate entries")


def need_enum(field: str, value: int, allowed: Sequence[int]) -> None:
    if value not in allowed:
        raise bad(field, f"unsupported value {value}", got=value)


def need_custody_auth(field: str, auth: pb.CustodyAuth) -> None:
    sig = auth.signature
    need_enum(f"{field}.signature.signature_type", sig.signature_type, (1, 2, 3))
    if not sig.signature:
        raise bad(f"{field}.signature.signature", "missing")


def validate_structure(data: pb.MessageData, kind: MessageKind[Any], network: int) -> None:
    """Check everything that needs no state, for a message of the registered `kind`."""
    if data.network != network:
        raise MessageRejected(
            Reason.WRONG_NETWORK, f"message is for network {data.network}, node is {network}", got=data.network
        )
    if data.WhichOneof("body") != kind.body:
        raise MessageRejected(
            Reason.BODY_MISMATCH, f"{kind.name} needs body {kind.body}, got {data.WhichOneof('body')}"
        )
    need_len("owner_address", data.owner_address, C.ADDRESS_LEN)
    if data.timestamp == 0:
        raise bad("timestamp", "must be set")
    kind.check(getattr(data, kind.body))


# ---- body checks, one per body type (the registry names which type uses which) ----
def project_create(b: pb.ProjectCreateBody) -> None:
    need_project_name("name", b.name)
    need_max("description", b.description, C.MAX_DESCRIPTION_LEN)
    need_enum("visibility", b.visibility, (0, 1, 2))


def project_metadata(b: pb.ProjectMetadataBody) -> None:
    need_len("project_id", b.project_id, C.HASH_LEN)
    need_enum("field", b.field, (1, 2, 3, 4, 5))
    if b.field == pb.PROJECT_FIELD_VISIBILITY:
        need_enum("value", {"public": 1, "private": 2}.get(b.value, 0), (1, 2))
    elif b.field == pb.PROJECT_FIELD_DESCRIPTION:
        need_max("value", b.value, C.MAX_DESCRIPTION_LEN)
    elif b.field == pb.PROJECT_FIELD_DEFAULT_BRANCH:
        need_ref_name("value", b.value.encode())
    else:
        need_max("value", b.value, C.MAX_TEXT_FIELD_LEN)


def project_id_only(b: pb.ProjectArchiveBody | pb.ProjectRemoveBody) -> None:
    need_len("project_id", b.project_id, C.HASH_LEN)


def fork(b: pb.ForkBody) -> None:
    need_len("source_project_id", b.source_project_id, C.HASH_LEN)
    need_project_name("name", b.name)


def ref_update(b: pb.RefUpdateBody) -> None:
    need_len("project_id", b.project_id, C.HASH_LEN)
    need_ref_name("ref_name", b.ref_name)
    need_len("new_hash", b.new_hash, C.HASH_LEN)
    if b.old_hash:
        need_len("old_hash", b.old_hash, C.HASH_LEN)
    if b.nonce == 0:
        raise bad("nonce", "must be at least 1")


def ref_delete(b: pb.RefDeleteBody) -> None:
    need_len("project_id", b.project_id, C.HASH_LEN)
    need_ref_name("ref_name", b.ref_name)
    if b.old_hash:
        need_len("old_hash", b.old_hash, C.HASH_LEN)
    if b.nonce == 0:
        raise bad("nonce", "must be at least 1")


def commit_bundle(b: pb.CommitBundleBody) -> None:
    need_len("project_id", b.project_id, C.HASH_LEN)
    if not 1 <= len(b.commits) <= C.MAX_COMMITS_PER_BUNDLE:
        raise MessageRejected(
            Reason.LIMIT_EXCEEDED,
            f"a bundle carries 1-{C.MAX_COMMITS_PER_BUNDLE} commits, got {len(b.commits)}",
            limit=C.MAX_COMMITS_PER_BUNDLE,
            got=len(b.commits),
        )
    need_unique("commits.hash", [c.hash for c in b.commits])
    for i, c in enumerate(b.commits):  # a field's name is spelled out only when it is refused
        if len(c.hash) != C.HASH_LEN:
            need_len(f"commits[{i}].hash", c.hash, C.HASH_LEN)
        if len(c.parents) > C.MAX_COMMIT_PARENTS:
            raise bad(f"commits[{i}].parents", f"at most {C.MAX_COMMIT_PARENTS}")
        for j, p in enumerate(c.parents):
            if len(p) != C.HASH_LEN:
                need_len(f"commits[{i}].parents[{j}]", p, C.HASH_LEN)
        if c.tree_hash and len(c.tree_hash) != C.HASH_LEN:
            need_len(f"commits[{i}].tree_hash", c.tree_hash, C.HASH_LEN)
        if c.author_address and len(c.author_address) != C.ADDRESS_LEN:
            need_len(f"commits[{i}].author_address", c.author_address, C.ADDRESS_LEN)
        if c.content_digest and len(c.content_digest) != C.HASH_LEN:
            need_len(f"commits[{i}].content_digest", c.content_digest, C.HASH_LEN)
        if len(c.title) > C.MAX_TITLE_LEN:
            need_max(f"commits[{i}].title", c.title, C.MAX_TITLE_LEN)
        if len(c.author_name) > C.MAX_TITLE_LEN:
            need_max(f"commits[{i}].author_name", c.author_name, C.MAX_TITLE_LEN)


def collaborator_add(b: pb.CollaboratorAddBody) -> None:
    need_len("project_id", b.project_id, C.HASH_LEN)
    need_len("collaborator_address", b.collaborator_address, C.ADDRESS_LEN)
    need_enum("permission", b.permission, (pb.PERMISSION_READ, pb.PERMISSION_WRITE, pb.PERMISSION_ADMIN))


def collaborator_remove(b: pb.CollaboratorRemoveBody) -> None:
    need_len("project_id", b.project_id, C.HASH_LEN)
    need_len("collaborator_address", b.collaborator_address, C.ADDRESS_LEN)


def merge_request_add(b: pb.MergeRequestAddBody) -> None:
    need_len("target_project_id", b.target_project_id, C.HASH_LEN)
    need_len("source_project_id", b.source_project_id, C.HASH_LEN)
    need_ref_name("source_ref", b.source_ref)
    need_ref_name("target_ref", b.target_ref)
    need_max("title", b.title, C.MAX_TITLE_LEN)
    need_max("description", b.description, C.MAX_DESCRIPTION_LEN)


def merge_request_remove(b: pb.MergeRequestRemoveBody) -> None:
    need_len("target_project_id", b.target_project_id, C.HASH_LEN)
    need_len("request_id", b.request_id, C.HASH_LEN)
    need_enum("reason", b.reason, (0, 1, 2))


def account_data(b: pb.AccountDataBody) -> None:
    need_enum("field", b.field, (1, 2, 3, 4))
    need_max("value", b.value, C.MAX_TEXT_FIELD_LEN)


def signer_add(b: pb.SignerAddBody) -> None:
    need_len("key", b.key, C.ED25519_KEY_LEN)
    need_enum("scope", b.scope, (pb.KEY_SCOPE_OWNER, pb.KEY_SCOPE_SIGNING, pb.KEY_SCOPE_AGENT))
    if b.allowed_projects and b.scope != pb.KEY_SCOPE_AGENT:
        raise bad("allowed_projects", "only AGENT keys are restricted to projects")
    if len(b.allowed_projects) > C.MAX_ALLOWED_PROJECTS:
        raise bad("allowed_projects", f"at most {C.MAX_ALLOWED_PROJECTS}")
    for i, p in enumerate(b.allowed_projects):
        need_len(f"allowed_projects[{i}]", p, C.HASH_LEN)
    need_unique("allowed_projects", list(b.allowed_projects))
    need_custody_auth("auth", b.auth)


def signer_remove(b: pb.SignerRemoveBody) -> None:
    need_len("key", b.key, C.ED25519_KEY_LEN)
    need_custody_auth("auth", b.auth)


def keychain_authorize(b: pb.KeychainAuthorizeBody) -> None:
    need_len("key_id", b.key_id, C.ADDRESS_LEN)
    need_enum("signature_type", b.signature_type, (1, 2, 3))
    if b.signature_type in (2, 3) or b.public_key:
        need_len("public_key", b.public_key, 64)
    if b.admin and b.expires_at:
        raise bad("expires_at", "admin keys do not expire")
    need_custody_auth("auth", b.auth)


def keychain_revoke(b: pb.KeychainRevokeBody) -> None:
    need_len("key_id", b.key_id, C.ADDRESS_LEN)
    need_custody_auth("auth", b.auth)


def storage_grant(b: pb.StorageGrantBody) -> None:
    need_len("recipient_address", b.recipient_address, C.ADDRESS_LEN)
    if not 1 <= b.units <= C.MAX_GRANT_UNITS:
        raise bad("units", f"must be 1-{C.MAX_GRANT_UNITS}", got=b.units)


def verification_add(b: pb.VerificationAddBody) -> None:
    need_len("address", b.address, C.ADDRESS_LEN)
    need_len("claim_signature", b.claim_signature, 65)


def verification_remove(b: pb.VerificationRemoveBody) -> None:
    need_len("address", b.address, C.ADDRESS_LEN)


def link(b: pb.LinkAddBody | pb.LinkRemoveBody) -> None:
    if b.type == pb.LINK_TYPE_FOLLOW:
        need_len("target_owner_address", b.target_owner_address, C.ADDRESS_LEN)
        if b.target_project_id:
            raise bad("target_project_id", "a follow targets an account")
    elif b.type == pb.LINK_TYPE_STAR:
        need_len("target_project_id", b.target_project_id, C.HASH_LEN)
        if b.target_owner_address:
            raise bad("target_owner_address", "a star targets a project")
    else:
        raise bad("type", "must be FOLLOW or STAR", got=int(b.type))


def reaction(b: pb.ReactionAddBody | pb.ReactionRemoveBody) -> None:
    need_enum("type", b.type, (pb.REACTION_TYPE_LIKE,))
    need_len("project_id", b.project_id, C.HASH_LEN)
    need_len("commit_hash", b.commit_hash, C.HASH_LEN)
