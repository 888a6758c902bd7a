"""Per-message-type facts: body field, required delegated-key scope, quota, project."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from chain.v1 import message_pb2 as pb


@dataclass(frozen=True)
class Kind:
    name: str
    body: str
    # Weakest delegated-key scope allowed to sign it; None: custody-authorized.
    scope: int | None
    # Quota-affecting: also rejected when too old.
    quota: bool = False


T = pb.MessageType
S_SIGNING: Final = pb.KEY_SCOPE_SIGNING
S_AGENT: Final = pb.KEY_SCOPE_AGENT

KINDS: Final[dict[int, Kind]] = {
    T.MESSAGE_TYPE_PROJECT_CREATE: Kind("PROJECT_CREATE", "project_create", S_SIGNING, quota=True),
    T.MESSAGE_TYPE_PROJECT_METADATA: Kind("PROJECT_METADATA", "project_metadata", S_SIGNING),
    T.MESSAGE_TYPE_PROJECT_ARCHIVE: Kind("PROJECT_ARCHIVE", "project_archive", S_SIGNING),
    T.MESSAGE_TYPE_FORK: Kind("FORK", "fork", S_SIGNING, quota=True),
    T.MESSAGE_TYPE_PROJECT_REMOVE: Kind("PROJECT_REMOVE", "project_remove", S_SIGNING),
    T.MESSAGE_TYPE_REF_UPDATE: Kind("REF_UPDATE", "ref_update", S_AGENT),
    T.MESSAGE_TYPE_REF_DELETE: Kind("REF_DELETE", "ref_delete", S_AGENT),
    T.MESSAGE_TYPE_SIGNER_ADD: Kind("SIGNER_ADD", "signer_add", None),
    T.MESSAGE_TYPE_SIGNER_REMOVE: Kind("SIGNER_REMOVE", "signer_remove", None),
    T.MESSAGE_TYPE_KEYCHAIN_AUTHORIZE: Kind("KEYCHAIN_AUTHORIZE", "keychain_authorize", None),
    T.MESSAGE_TYPE_KEYCHAIN_REVOKE: Kind("KEYCHAIN_REVOKE", "keychain_revoke", None),
    T.MESSAGE_TYPE_COMMIT_BUNDLE: Kind("COMMIT_BUNDLE", "commit_bundle", S_AGENT),
    T.MESSAGE_TYPE_COLLABORATOR_ADD: Kind("COLLABORATOR_ADD", "collaborator_add", S_SIGNING, quota=True),
    T.MESSAGE_TYPE_COLLABORATOR_REMOVE: Kind("COLLABORATOR_REMOVE", "collaborator_remove", S_SIGNING),
    T.MESSAGE_TYPE_ACCOUNT_DATA: Kind("ACCOUNT_DATA", "account_data", S_SIGNING),
    T.MESSAGE_TYPE_STORAGE_GRANT: Kind("STORAGE_GRANT", "storage_grant", S_SIGNING, quota=True),
    T.MESSAGE_TYPE_VERIFICATION_ADD: Kind("VERIFICATION_ADD", "verification_add", S_SIGNING, quota=True),
    T.MESSAGE_TYPE_VERIFICATION_REMOVE: Kind("VERIFICATION_REMOVE", "verification_remove", S_SIGNING),
    T.MESSAGE_TYPE_LINK_ADD: Kind("LINK_ADD", "link_add", S_SIGNING, quota=True),
    T.MESSAGE_TYPE_LINK_REMOVE: Kind("LINK_REMOVE", "link_remove", S_SIGNING),
    T.MESSAGE_TYPE_REACTION_ADD: Kind("REACTION_ADD", "reaction_add", S_SIGNING, quota=True),
    T.MESSAGE_TYPE_REACTION_REMOVE: Kind("REACTION_REMOVE", "reaction_remove", S_SIGNING),
    T.MESSAGE_TYPE_MERGE_REQUEST_ADD: Kind("MERGE_REQUEST_ADD", "merge_request_add", S_SIGNING),
    T.MESSAGE_TYPE_MERGE_REQUEST_REMOVE: Kind("MERGE_REQUEST_REMOVE", "merge_request_remove", S_SIGNING),
}


def project_of(data: pb.MessageData, message_hash: bytes) -> bytes:
    """The project a message acts on ("" when none): activity index and AGENT key scoping."""
    body_name = data.WhichOneof("body")
    if body_name in ("project_create", "fork"):
        return message_hash
    if body_name is None:
        return b""
    body = getattr(data, body_name)
    for field in ("project_id", "target_project_id"):
        if hasattr(body, field):
            return bytes(getattr(body, field))
    if body_name in ("link_add", "link_remove"):
        return bytes(body.target_project_id)
    return b""
