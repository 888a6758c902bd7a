"""Builders for every message type: what a client signs and submits.

    keys = Ed25519Key.generate()
    wallet = Secp256k1Key.generate()
    b = MessageBuilder(owner=wallet.address, signer=keys)
    msg = b.signer_add(custody=wallet, nonce=0, scope=KEY_SCOPE_OWNER)   # bootstrap
    msg = b.project_create("hello")

Each method returns a signed `chain.v1.Message` (hash over the canonical
encoding, Ed25519 signature, data_bytes set). Timestamps default to the
builder's clock; pass `timestamp=` to pin one. The envelope signing and the
SIGNER_ADD construction are node.envelope (the node's devnet genesis builds its
bootstrap SIGNER_ADD with them too); `sign_message`, `custody_signature_proto`
and `CustodyKey` are re-exported here.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from chain.v1 import message_pb2 as pb
from node.crypto import eip712
from node.envelope import CustodyKey, custody_auth, custody_signature_proto, sign_message, signer_add_message
from node.sdk.keys import Ed25519Key

__all__ = ["CustodyKey", "MessageBuilder", "custody_signature_proto", "sign_message"]


class MessageBuilder:
    """Signed messages of one account (`owner`, its 20-byte address), signed by its delegated `signer`.

    One method per message type (`signer_add`, `storage_grant`, `project_create`, `commit_bundle`,
    `ref_update`, `follow`, `like`, ...); each returns a `chain.v1.message_pb2.Message` ready to submit,
    stamped with `clock()` (seconds) for the `network` the node serves."""

    def __init__(
        self,
        owner: bytes,
        signer: Ed25519Key,
        *,
        network: pb.Network.ValueType = pb.NETWORK_DEVNET,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.owner = owner
        self.signer = signer
        self.network = network
        self.clock = clock

    def now(self) -> int:
        return int(self.clock())

    def build(
        self, mtype: pb.MessageType.ValueType, body_field: str, body: Any, timestamp: int | None = None
    ) -> pb.Message:
        data = pb.MessageData(
            type=mtype, owner_address=self.owner, timestamp=timestamp or self.now(), network=self.network
        )
        getattr(data, body_field).CopyFrom(body)
        return sign_message(data, self.signer)

    def _custody(self, custody: CustodyKey, nonce: int, digest_for: Callable[[int, int], bytes]) -> pb.CustodyAuth:
        return custody_auth(custody, nonce, self.now(), digest_for)

    # ---- custody-authorized ----
    def signer_add(
        self,
        custody: CustodyKey,
        nonce: int,
        *,
        key: Ed25519Key | None = None,
        scope: pb.KeyScope.ValueType = pb.KEY_SCOPE_OWNER,
        allowed_projects: Sequence[bytes] = (),
        timestamp: int | None = None,
    ) -> pb.Message:
        """Register a delegated key; the envelope is signed by that key (default: the builder's)."""
        return signer_add_message(
            self.owner,
            custody,
            nonce,
            key or self.signer,
            network=self.network,
            now=self.now(),
            scope=scope,
            allowed_projects=allowed_projects,
            timestamp=timestamp,
        )

    def signer_remove(self, custody: CustodyKey, nonce: int, key: bytes, timestamp: int | None = None) -> pb.Message:
        auth = self._custody(
            custody,
            nonce,
            lambda va, dl: eip712.signer_remove_digest(
                self.network, owner=self.owner, key=key, nonce=nonce, valid_after=va, deadline=dl
            ),
        )
        return self.build(
            pb.MESSAGE_TYPE_SIGNER_REMOVE, "signer_remove", pb.SignerRemoveBody(key=key, auth=auth), timestamp
        )

    def keychain_authorize(
        self,
        custody: CustodyKey,
        nonce: int,
        new_key: CustodyKey,
        *,
        admin: bool = False,
        expires_at: int = 0,
        public_key: bytes | None = None,
        timestamp: int | None = None,
    ) -> pb.Message:
        pub = public_key if public_key is not None else _custody_public_key(new_key)
        sig_type = int(new_key.signature_type)
        auth = self._custody(
            custody,
            nonce,
            lambda va, dl: eip712.keychain_authorize_digest(
                self.network,
                owner=self.owner,
                key_id=new_key.address,
                signature_type=sig_type,
                public_key=pub,
                admin=admin,
                expires_at=expires_at,
                nonce=nonce,
                valid_after=va,
                deadline=dl,
            ),
        )
        body = pb.KeychainAuthorizeBody(
            key_id=new_key.address,
            signature_type=sig_type,
            public_key=pub,
            admin=admin,
            expires_at=expires_at,
            auth=auth,
        )
        return self.build(pb.MESSAGE_TYPE_KEYCHAIN_AUTHORIZE, "keychain_authorize", body, timestamp)

    def keychain_revoke(
        self, custody: CustodyKey, nonce: int, key_id: bytes, timestamp: int | None = None
    ) -> pb.Message:
        auth = self._custody(
            custody,
            nonce,
            lambda va, dl: eip712.keychain_revoke_digest(
                self.network, owner=self.owner, key_id=key_id, nonce=nonce, valid_after=va, deadline=dl
            ),
        )
        return self.build(
            pb.MESSAGE_TYPE_KEYCHAIN_REVOKE,
            "keychain_revoke",
            pb.KeychainRevokeBody(key_id=key_id, auth=auth),
            timestamp,
        )

    # ---- accounts ----
    def account_data(self, field: pb.AccountField.ValueType, value: str, timestamp: int | None = None) -> pb.Message:
        body = pb.AccountDataBody(field=field, value=value)
        return self.build(pb.MESSAGE_TYPE_ACCOUNT_DATA, "account_data", body, timestamp)

    def verification_add(self, wallet: Any, timestamp: int | None = None) -> pb.Message:
        """Verify an external Ethereum address (`wallet`: a Secp256k1Key) for this account."""
        ts = timestamp or self.now()
        digest = eip712.verification_claim_digest(
            self.network, owner=self.owner, verified_address=wallet.address, timestamp=ts
        )
        body = pb.VerificationAddBody(address=wallet.address, claim_signature=wallet.sign_digest(digest))
        return self.build(pb.MESSAGE_TYPE_VERIFICATION_ADD, "verification_add", body, ts)

    def verification_remove(self, address: bytes, timestamp: int | None = None) -> pb.Message:
        body = pb.VerificationRemoveBody(address=address)
        return self.build(pb.MESSAGE_TYPE_VERIFICATION_REMOVE, "verification_remove", body, timestamp)

    def storage_grant(self, recipient: bytes, units: int, timestamp: int | None = None) -> pb.Message:
        body = pb.StorageGrantBody(recipient_address=recipient, units=units)
        return self.build(pb.MESSAGE_TYPE_STORAGE_GRANT, "storage_grant", body, timestamp)

    # ---- projects ----
    def project_create(
        self,
        name: str,
        description: str = "",
        visibility: pb.ProjectVisibility.ValueType = pb.PROJECT_VISIBILITY_PUBLIC,
        timestamp: int | None = None,
    ) -> pb.Message:
        body = pb.ProjectCreateBody(name=name, description=description, visibility=visibility)
        return self.build(pb.MESSAGE_TYPE_PROJECT_CREATE, "project_create", body, timestamp)

    def project_metadata(
        self, project_id: bytes, field: pb.ProjectField.ValueType, value: str, timestamp: int | None = None
    ) -> pb.Message:
        body = pb.ProjectMetadataBody(project_id=project_id, field=field, value=value)
        return self.build(pb.MESSAGE_TYPE_PROJECT_METADATA, "project_metadata", body, timestamp)

    def project_archive(self, project_id: bytes, archived: bool = True, timestamp: int | None = None) -> pb.Message:
        body = pb.ProjectArchiveBody(project_id=project_id, archived=archived)
        return self.build(pb.MESSAGE_TYPE_PROJECT_ARCHIVE, "project_archive", body, timestamp)

    def project_remove(self, project_id: bytes, timestamp: int | None = None) -> pb.Message:
        body = pb.ProjectRemoveBody(project_id=project_id)
        return self.build(pb.MESSAGE_TYPE_PROJECT_REMOVE, "project_remove", body, timestamp)

    def fork(self, source_project_id: bytes, name: str, timestamp: int | None = None) -> pb.Message:
        body = pb.ForkBody(source_project_id=source_project_id, name=name)
        return self.build(pb.MESSAGE_TYPE_FORK, "fork", body, timestamp)

    def collaborator_add(
        self, project_id: bytes, address: bytes, permission: pb.Permission.ValueType, timestamp: int | None = None
    ) -> pb.Message:
        body = pb.CollaboratorAddBody(project_id=project_id, collaborator_address=address, permission=permission)
        return self.build(pb.MESSAGE_TYPE_COLLABORATOR_ADD, "collaborator_add", body, timestamp)

    def collaborator_remove(self, project_id: bytes, address: bytes, timestamp: int | None = None) -> pb.Message:
        body = pb.CollaboratorRemoveBody(project_id=project_id, collaborator_address=address)
        return self.build(pb.MESSAGE_TYPE_COLLABORATOR_REMOVE, "collaborator_remove", body, timestamp)

    def merge_request_add(
        self,
        target_project_id: bytes,
        source_project_id: bytes,
        source_ref: bytes,
        target_ref: bytes,
        title: str = "",
        timestamp: int | None = None,
        description: str = "",
    ) -> pb.Message:
        body = pb.MergeRequestAddBody(
            target_project_id=target_project_id,
            source_project_id=source_project_id,
            source_ref=source_ref,
            target_ref=target_ref,
            title=title,
            description=description,
        )
        return self.build(pb.MESSAGE_TYPE_MERGE_REQUEST_ADD, "merge_request_add", body, timestamp)

    def merge_request_remove(
        self,
        target_project_id: bytes,
        request_id: bytes,
        reason: pb.MergeRequestCloseReason.ValueType = pb.MERGE_REQUEST_CLOSE_REASON_CLOSED,
        timestamp: int | None = None,
    ) -> pb.Message:
        body = pb.MergeRequestRemoveBody(target_project_id=target_project_id, request_id=request_id, reason=reason)
        return self.build(pb.MESSAGE_TYPE_MERGE_REQUEST_REMOVE, "merge_request_remove", body, timestamp)

    # ---- git objects ----
    def commit_bundle(
        self, project_id: bytes, commits: Sequence[pb.CommitMeta], timestamp: int | None = None
    ) -> pb.Message:
        body = pb.CommitBundleBody(project_id=project_id, commits=commits)
        return self.build(pb.MESSAGE_TYPE_COMMIT_BUNDLE, "commit_bundle", body, timestamp)

    def ref_update(
        self,
        project_id: bytes,
        ref_name: bytes,
        new_hash: bytes,
        nonce: int,
        *,
        old_hash: bytes = b"",
        force: bool = False,
        timestamp: int | None = None,
    ) -> pb.Message:
        body = pb.RefUpdateBody(
            project_id=project_id, ref_name=ref_name, new_hash=new_hash, old_hash=old_hash, nonce=nonce, force=force
        )
        return self.build(pb.MESSAGE_TYPE_REF_UPDATE, "ref_update", body, timestamp)

    def ref_delete(
        self, project_id: bytes, ref_name: bytes, nonce: int, *, old_hash: bytes = b"", timestamp: int | None = None
    ) -> pb.Message:
        body = pb.RefDeleteBody(project_id=project_id, ref_name=ref_name, old_hash=old_hash, nonce=nonce)
        return self.build(pb.MESSAGE_TYPE_REF_DELETE, "ref_delete", body, timestamp)

    # ---- social ----
    def follow(self, target: bytes, *, remove: bool = False, timestamp: int | None = None) -> pb.Message:
        return self._link(pb.LINK_TYPE_FOLLOW, remove, timestamp, target_owner_address=target)

    def star(self, project_id: bytes, *, remove: bool = False, timestamp: int | None = None) -> pb.Message:
        return self._link(pb.LINK_TYPE_STAR, remove, timestamp, target_project_id=project_id)

    def _link(self, ltype: pb.LinkType.ValueType, remove: bool, timestamp: int | None, **target: bytes) -> pb.Message:
        if remove:
            return self.build(
                pb.MESSAGE_TYPE_LINK_REMOVE, "link_remove", pb.LinkRemoveBody(type=ltype, **target), timestamp
            )
        return self.build(pb.MESSAGE_TYPE_LINK_ADD, "link_add", pb.LinkAddBody(type=ltype, **target), timestamp)

    def like(
        self, project_id: bytes, commit_hash: bytes, *, remove: bool = False, timestamp: int | None = None
    ) -> pb.Message:
        like = pb.REACTION_TYPE_LIKE
        if remove:
            body = pb.ReactionRemoveBody(type=like, project_id=project_id, commit_hash=commit_hash)
            return self.build(pb.MESSAGE_TYPE_REACTION_REMOVE, "reaction_remove", body, timestamp)
        add = pb.ReactionAddBody(type=like, project_id=project_id, commit_hash=commit_hash)
        return self.build(pb.MESSAGE_TYPE_REACTION_ADD, "reaction_add", add, timestamp)


def _custody_public_key(key: CustodyKey) -> bytes:
    """Custody rows carry x|y for P-256 and WebAuthn; secp256k1 keys are recovered (empty)."""
    if int(key.signature_type) == 1:
        return b""
    return bytes(key.public_key)[-64:]  # type: ignore[attr-defined]
