"""Who may do what: delegated-key scopes, custody authority, project permissions."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from chain.v1 import message_pb2 as pb
from chain.v1 import state_pb2
from node import constants as C
from node.crypto.custody import CustodySignature, verify_custody_signature
from node.crypto.errors import CustodySignatureError
from node.crypto.webauthn import WebAuthnPolicy
from node.errors import MessageRejected, Reason
from node.state.context import MessageContext
from node.state.kinds import MessageKind, project_of


def _scope(value: int) -> str:
    return pb.KeyScope.Name(pb.KeyScope.ValueType(value))


def _perm(value: int) -> str:
    return pb.Permission.Name(pb.Permission.ValueType(value))


def authorize_signer(ctx: MessageContext, kind: MessageKind[Any]) -> state_pb2.KeyEntry | None:
    """Delegated-key check for user-signed messages (custody-authorized ones skip it)."""
    if kind.scope is None:
        return None
    entry = ctx.st.signer(ctx.owner, ctx.signer)
    if entry is None:
        raise MessageRejected(
            Reason.UNKNOWN_SIGNER, "signer is not a delegated key of owner_address", signer=ctx.signer.hex()
        )
    if entry.scope > kind.scope:
        raise MessageRejected(
            Reason.INSUFFICIENT_SCOPE,
            f"{kind.name} needs scope {_scope(kind.scope)}, key has {_scope(entry.scope)}",
            required=kind.scope,
            got=entry.scope,
        )
    if entry.allowed_projects:
        project = project_of(ctx.data, ctx.message_hash)
        if project not in entry.allowed_projects:
            raise MessageRejected(
                Reason.PROJECT_NOT_ALLOWED, "AGENT key is not allowed on this project", project=project.hex()
            )
    return entry


def webauthn_policy(ctx: MessageContext) -> WebAuthnPolicy:
    return WebAuthnPolicy(rp_id=ctx.params.webauthn_rp_id, allowed_origins=ctx.params.webauthn_origins)


def authorize_custody(
    ctx: MessageContext,
    auth: pb.CustodyAuth,
    digest_for: Callable[[int], bytes],
    *,
    admin: bool,
) -> bytes:
    """Check a custody authorization and consume the account's custody nonce.

    `digest_for(nonce)` builds the EIP-712 digest the key must have signed.
    Returns the 20-byte address of the custody key that signed.
    """
    if auth.deadline <= auth.valid_after or auth.deadline - auth.valid_after > C.MAX_CUSTODY_VALIDITY_WINDOW:
        raise MessageRejected(
            Reason.AUTH_WINDOW_INVALID,
            f"validity window must be 1-{C.MAX_CUSTODY_VALIDITY_WINDOW} s",
            valid_after=auth.valid_after,
            deadline=auth.deadline,
        )
    if ctx.now < auth.valid_after:
        raise MessageRejected(Reason.AUTH_NOT_YET_VALID, "custody authorization not valid yet", now=ctx.now)
    if ctx.now > auth.deadline:
        raise MessageRejected(Reason.AUTH_EXPIRED, "custody authorization expired", now=ctx.now)
    account = ctx.st.account_or_new(ctx.owner)
    if auth.nonce != account.custody_nonce:
        raise MessageRejected(
            Reason.NONCE_MISMATCH,
            f"custody nonce must be {account.custody_nonce}",
            expected=account.custody_nonce,
            got=auth.nonce,
        )
    s = auth.signature
    sig = CustodySignature(
        signature_type=s.signature_type,
        signature=bytes(s.signature),
        public_key=bytes(s.public_key),
        authenticator_data=bytes(s.authenticator_data),
        client_data_json=bytes(s.client_data_json),
    )
    try:
        digest = digest_for(auth.nonce)
    except ValueError as exc:  # a field the typed data cannot encode
        raise MessageRejected(Reason.INVALID_FIELD, f"custody payload: {exc}") from None
    try:
        key_id = verify_custody_signature(sig, digest, webauthn_policy=webauthn_policy(ctx))
    except CustodySignatureError as exc:
        raise MessageRejected(
            Reason.CUSTODY_SIGNATURE_INVALID, f"{exc.reason.value}: {exc.detail}", cause=exc.reason.value
        ) from None
    if key_id != ctx.owner:  # the root key (address == owner_address) is an implicit admin
        check_custody_key(ctx, key_id, s.signature_type, admin=admin)
    account.custody_nonce += 1
    ctx.st.put_account(account)
    return key_id


def check_custody_key(ctx: MessageContext, key_id: bytes, signature_type: int, *, admin: bool) -> None:
    row = ctx.st.custody_key(ctx.owner, key_id)
    if row is None or row.signature_type != signature_type:
        raise MessageRejected(Reason.CUSTODY_KEY_UNKNOWN, "not a custody key of this account", key_id=key_id.hex())
    if row.status == state_pb2.CUSTODY_KEY_STATUS_REVOKED:
        raise MessageRejected(Reason.CUSTODY_KEY_REVOKED, "custody key is revoked", key_id=key_id.hex())
    if row.expires_at and row.expires_at <= ctx.now:
        raise MessageRejected(
            Reason.CUSTODY_KEY_EXPIRED, "custody key expired", key_id=key_id.hex(), expires_at=row.expires_at
        )
    if admin and not row.admin:
        raise MessageRejected(Reason.CUSTODY_KEY_NOT_ADMIN, "needs an admin custody key", key_id=key_id.hex())


# ---- projects ----
def live_project(ctx: MessageContext, project_id: bytes, *, writable: bool = True) -> state_pb2.Project:
    """The project, which must exist and not be removed (nor archived when `writable`)."""
    project = ctx.st.project(project_id)
    if project is None:
        raise MessageRejected(Reason.PROJECT_NOT_FOUND, "no such project", project_id=project_id.hex())
    if project.status == state_pb2.PROJECT_STATUS_REMOVED:
        raise MessageRejected(Reason.PROJECT_REMOVED, "project was removed", project_id=project_id.hex())
    if writable and project.status == state_pb2.PROJECT_STATUS_ARCHIVED:
        raise MessageRejected(Reason.PROJECT_ARCHIVED, "project is archived", project_id=project_id.hex())
    return project


def permission(ctx: MessageContext, project: state_pb2.Project, address: bytes) -> int:
    if address == project.owner_address:
        return pb.PERMISSION_OWNER
    collaborator = ctx.st.collaborator(project.project_id, address)
    if collaborator is not None:
        return int(collaborator.permission)
    if project.visibility != pb.PROJECT_VISIBILITY_PRIVATE:
        return pb.PERMISSION_READ
    return pb.PERMISSION_UNSPECIFIED


def require_permission(ctx: MessageContext, project: state_pb2.Project, needed: int) -> int:
    have = permission(ctx, project, ctx.owner)
    if have < needed:
        raise MessageRejected(
            Reason.PERMISSION_DENIED,
            f"needs {_perm(needed)} on the project, has {_perm(have)}",
            required=needed,
            got=have,
        )
    return have
