"""Account handlers: metadata, delegated keys, custody keychain, verifications, storage."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

from chain.v1 import message_pb2 as pb
from chain.v1 import state_pb2
from node import constants as C
from node.crypto import eip712
from node.crypto.custody import CustodySignature, SignatureType, custody_key_address, verify_custody_signature
from node.crypto.errors import CustodySignatureError
from node.errors import MessageRejected, Reason
from node.state.authz import authorize_custody, webauthn_policy
from node.state.context import MessageContext
from node.state.rules import check_limit, check_quota, lww_write, set_add, set_remove
from node.storage import schema

ACCOUNT_FIELDS: Final[Mapping[int, str]] = MappingProxyType(
    {
        pb.ACCOUNT_FIELD_DISPLAY_NAME: "display_name",
        pb.ACCOUNT_FIELD_AVATAR: "avatar",
        pb.ACCOUNT_FIELD_BIO: "bio",
        pb.ACCOUNT_FIELD_WEBSITE: "website",
    }
)


def account_data(ctx: MessageContext, body: pb.AccountDataBody) -> None:
    lww_write(ctx.st, schema.lww_stamp_key(schema.LwwEntity.ACCOUNT, ctx.owner, body.field), ctx.ts)
    account = ctx.st.account_or_new(ctx.owner)
    setattr(account, ACCOUNT_FIELDS[body.field], body.value)
    ctx.st.put_account(account)


# ---- delegated keys (custody-authorized) ----
def signer_add(ctx: MessageContext, body: pb.SignerAddBody) -> None:
    if ctx.signer != body.key:
        raise MessageRejected(Reason.INVALID_FIELD, "SIGNER_ADD must be signed by the key it adds", field="signer")
    key_id = authorize_custody(
        ctx,
        body.auth,
        lambda nonce: eip712.signer_add_digest(
            ctx.params.network,
            owner=ctx.owner,
            key=body.key,
            scope=body.scope,
            allowed_projects=list(body.allowed_projects),
            nonce=nonce,
            valid_after=body.auth.valid_after,
            deadline=body.auth.deadline,
        ),
        admin=False,
    )
    if ctx.st.signer(ctx.owner, body.key) is not None:
        raise MessageRejected(Reason.ALREADY_EXISTS, "key already registered", key=body.key.hex())
    account = ctx.st.account_or_new(ctx.owner)
    check_limit("delegated keys", account.key_count, C.MAX_DELEGATED_KEYS)
    entry = state_pb2.KeyEntry(
        owner_address=ctx.owner,
        key=body.key,
        scope=body.scope,
        allowed_projects=body.allowed_projects,
        added_at=ctx.ts,
        authorized_by=key_id,
    )
    ctx.st.store(schema.signer_key(ctx.owner, body.key), entry)
    account.key_count += 1
    ctx.st.put_account(account)


def signer_remove(ctx: MessageContext, body: pb.SignerRemoveBody) -> None:
    authorize_custody(
        ctx,
        body.auth,
        lambda nonce: eip712.signer_remove_digest(
            ctx.params.network,
            owner=ctx.owner,
            key=body.key,
            nonce=nonce,
            valid_after=body.auth.valid_after,
            deadline=body.auth.deadline,
        ),
        admin=False,
    )
    if ctx.st.signer(ctx.owner, body.key) is None:
        raise MessageRejected(Reason.NOT_PRESENT, "key is not registered", key=body.key.hex())
    ctx.st.delete(schema.signer_key(ctx.owner, body.key))
    account = ctx.st.account_or_new(ctx.owner)
    account.key_count -= 1
    ctx.st.put_account(account)


# ---- custody keychain ----
def keychain_authorize(ctx: MessageContext, body: pb.KeychainAuthorizeBody) -> None:
    if body.key_id == ctx.owner:
        raise MessageRejected(Reason.INVALID_FIELD, "the root key is implicit", field="key_id")
    if body.public_key:
        try:
            derived = custody_key_address(body.signature_type, body.public_key)
        except ValueError as exc:
            raise MessageRejected(Reason.INVALID_FIELD, f"public_key: {exc}", field="public_key") from None
        if derived != body.key_id:
            raise MessageRejected(Reason.INVALID_FIELD, "key_id is not the public key's address", field="key_id")
    if body.expires_at and body.expires_at <= ctx.now:
        raise MessageRejected(Reason.INVALID_FIELD, "expires_at is in the past", field="expires_at")
    authorize_custody(
        ctx,
        body.auth,
        lambda nonce: eip712.keychain_authorize_digest(
            ctx.params.network,
            owner=ctx.owner,
            key_id=body.key_id,
            signature_type=body.signature_type,
            public_key=body.public_key,
            admin=body.admin,
            expires_at=body.expires_at,
            nonce=nonce,
            valid_after=body.auth.valid_after,
            deadline=body.auth.deadline,
        ),
        admin=True,
    )
    existing = ctx.st.custody_key(ctx.owner, body.key_id)
    if existing is not None:
        if existing.status == state_pb2.CUSTODY_KEY_STATUS_REVOKED:
            raise MessageRejected(Reason.CUSTODY_KEY_REVOKED, "a revoked key stays revoked", key_id=body.key_id.hex())
        raise MessageRejected(Reason.ALREADY_EXISTS, "custody key already authorized", key_id=body.key_id.hex())
    account = ctx.st.account_or_new(ctx.owner)
    check_limit("custody keys", account.custody_key_count, C.MAX_CUSTODY_KEYS)
    ctx.st.put_custody_key(
        ctx.owner,
        state_pb2.CustodyKey(
            key_id=body.key_id,
            signature_type=body.signature_type,
            public_key=body.public_key,
            admin=body.admin,
            expires_at=body.expires_at,
            added_at=ctx.ts,
            status=state_pb2.CUSTODY_KEY_STATUS_ACTIVE,
        ),
    )
    account = ctx.st.account_or_new(ctx.owner)  # reload: authorize_custody bumped the nonce
    account.custody_key_count += 1
    ctx.st.put_account(account)


def keychain_revoke(ctx: MessageContext, body: pb.KeychainRevokeBody) -> None:
    if body.key_id == ctx.owner:
        raise MessageRejected(Reason.INVALID_FIELD, "the root key cannot be revoked", field="key_id")
    authorize_custody(
        ctx,
        body.auth,
        lambda nonce: eip712.keychain_revoke_digest(
            ctx.params.network,
            owner=ctx.owner,
            key_id=body.key_id,
            nonce=nonce,
            valid_after=body.auth.valid_after,
            deadline=body.auth.deadline,
        ),
        admin=True,
    )
    row = ctx.st.custody_key(ctx.owner, body.key_id)
    if row is None:
        raise MessageRejected(Reason.CUSTODY_KEY_UNKNOWN, "no such custody key", key_id=body.key_id.hex())
    if row.status == state_pb2.CUSTODY_KEY_STATUS_REVOKED:
        raise MessageRejected(Reason.CUSTODY_KEY_REVOKED, "already revoked", key_id=body.key_id.hex())
    row.status = state_pb2.CUSTODY_KEY_STATUS_REVOKED
    row.revoked_at = ctx.ts
    ctx.st.put_custody_key(ctx.owner, row)
    account = ctx.st.account_or_new(ctx.owner)
    account.custody_key_count -= 1
    ctx.st.put_account(account)


# ---- verifications ----
def verification_add(ctx: MessageContext, body: pb.VerificationAddBody) -> None:
    digest = eip712.verification_claim_digest(
        ctx.params.network, owner=ctx.owner, verified_address=body.address, timestamp=ctx.ts
    )
    claim = CustodySignature(signature_type=SignatureType.SECP256K1, signature=bytes(body.claim_signature))
    try:
        signer = verify_custody_signature(claim, digest, webauthn_policy=webauthn_policy(ctx))
    except CustodySignatureError as exc:
        raise MessageRejected(Reason.INVALID_SIGNATURE, f"claim: {exc.reason.value}: {exc.detail}") from None
    if signer != body.address:
        raise MessageRejected(Reason.INVALID_SIGNATURE, "claim is not signed by the verified address")
    key = schema.verification_key(ctx.owner, body.address)
    existing = ctx.st.load(state_pb2.Verification, key)
    account = ctx.st.account_or_new(ctx.owner)
    if existing is None:
        check_quota(ctx.st, ctx.owner, ctx.now, "verifications", account.verification_count, C.UNIT_VERIFICATIONS)
    if set_add(ctx.st, key, ctx.ts, existing.added_at if existing else None):
        account.verification_count += 1
        ctx.st.put_account(account)
    ctx.st.store(
        key,
        state_pb2.Verification(
            owner_address=ctx.owner, address=body.address, added_at=ctx.ts, claim_signature=body.claim_signature
        ),
    )


def verification_remove(ctx: MessageContext, body: pb.VerificationRemoveBody) -> None:
    key = schema.verification_key(ctx.owner, body.address)
    existing = ctx.st.load(state_pb2.Verification, key)
    if not set_remove(ctx.st, key, ctx.ts, existing.added_at if existing else None):
        return
    account = ctx.st.account_or_new(ctx.owner)
    account.verification_count -= 1
    ctx.st.put_account(account)


# ---- storage ----
def storage_grant(ctx: MessageContext, body: pb.StorageGrantBody) -> None:
    if ctx.owner not in ctx.params.storage_authorities:
        raise MessageRejected(Reason.NOT_STORAGE_AUTHORITY, "owner_address is not a storage authority")
    recipient = bytes(body.recipient_address)
    index = ctx.st.grant_index(recipient)
    active: list[bytes] = []
    units = 0
    for grant_id in index.grant_ids:  # prune expired grants from the index as we go
        grant = ctx.st.grant(recipient, grant_id)
        if grant is not None and grant.expires_at > ctx.now:
            active.append(grant_id)
            units += grant.units
        else:
            ctx.st.delete(schema.storage_grant_key(recipient, grant_id))
    check_limit("active storage grants", len(active), C.MAX_ACTIVE_GRANTS)
    grant = state_pb2.StorageGrant(
        grant_id=ctx.message_hash,
        owner_address=recipient,
        units=body.units,
        granted_at=ctx.ts,
        expires_at=ctx.ts + C.STORAGE_GRANT_DURATION,
        authority_address=ctx.owner,
    )
    ctx.st.store(schema.storage_grant_key(recipient, grant.grant_id), grant)
    ctx.st.store(
        schema.storage_grant_index_key(recipient), state_pb2.StorageGrantIndex(grant_ids=[*active, grant.grant_id])
    )
    account = ctx.st.account_or_new(recipient)
    account.storage_units = units + body.units
    ctx.st.put_account(account)
