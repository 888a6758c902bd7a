"""Every message type in one table: body, check, signer scope, quota class, time rule, handler.

The quota class (`quota=True`) is what the stale-timestamp rule follows: the types that add an element
counted against storage quota (PROJECT_CREATE, FORK, COLLABORATOR_ADD, STORAGE_GRANT, VERIFICATION_ADD,
LINK_ADD, REACTION_ADD) and the removes that tombstone such an element (COLLABORATOR_REMOVE,
VERIFICATION_REMOVE, LINK_REMOVE, REACTION_REMOVE): the public reference's storage-sensitive set, less
what this chain does not have. docs/state.md "Stale timestamps" has the reasoning and the differences.

`REGISTRY.kind_of(type)` is the only way the transition learns what a message is. A type that is
neither registered nor disabled is a typed rejection (UNKNOWN_MESSAGE_TYPE), never a KeyError; a
retired relay-era type is DISABLED_MESSAGE_TYPE. `MESSAGE_TYPE_UNSPECIFIED` (0, what a message that
never set its type carries) is deliberately neither: it is unknown.
tests/node/state/test_registry.py checks that every `MessageType` value is accounted for.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final

from chain.v1 import message_pb2 as pb
from node.errors import InvariantBroken, MessageRejected, Reason
from node.state import structural as checks
from node.state.handlers import accounts, git, projects, social
from node.state.kinds import MessageKind

T = pb.MessageType
SIGNING: Final = pb.KEY_SCOPE_SIGNING
AGENT: Final = pb.KEY_SCOPE_AGENT
CUSTODY: Final = None  # authorized by a custody signature in the body, not by a delegated key

# fmt: off
KINDS: Final = (  # no declared element type, so mypy checks each entry: its check and handler take its body
    # projects
    MessageKind(T.MESSAGE_TYPE_PROJECT_CREATE, "project_create", pb.ProjectCreateBody,
                checks.project_create, projects.project_create, SIGNING, quota=True),
    MessageKind(T.MESSAGE_TYPE_PROJECT_METADATA, "project_metadata", pb.ProjectMetadataBody,
                checks.project_metadata, projects.project_metadata, SIGNING),
    MessageKind(T.MESSAGE_TYPE_PROJECT_ARCHIVE, "project_archive", pb.ProjectArchiveBody,
                checks.project_id_only, projects.project_archive, SIGNING),
    MessageKind(T.MESSAGE_TYPE_FORK, "fork", pb.ForkBody,
                checks.fork, projects.fork, SIGNING, quota=True),
    MessageKind(T.MESSAGE_TYPE_PROJECT_REMOVE, "project_remove", pb.ProjectRemoveBody,
                checks.project_id_only, projects.project_remove, SIGNING),
    MessageKind(T.MESSAGE_TYPE_COLLABORATOR_ADD, "collaborator_add", pb.CollaboratorAddBody,
                checks.collaborator_add, projects.collaborator_add, SIGNING, quota=True),
    MessageKind(T.MESSAGE_TYPE_COLLABORATOR_REMOVE, "collaborator_remove", pb.CollaboratorRemoveBody,
                checks.collaborator_remove, projects.collaborator_remove, SIGNING, quota=True),
    MessageKind(T.MESSAGE_TYPE_MERGE_REQUEST_ADD, "merge_request_add", pb.MergeRequestAddBody,
                checks.merge_request_add, projects.merge_request_add, SIGNING),
    MessageKind(T.MESSAGE_TYPE_MERGE_REQUEST_REMOVE, "merge_request_remove", pb.MergeRequestRemoveBody,
                checks.merge_request_remove, projects.merge_request_remove, SIGNING),
    # git
    MessageKind(T.MESSAGE_TYPE_REF_UPDATE, "ref_update", pb.RefUpdateBody,
                checks.ref_update, git.ref_update, AGENT),
    MessageKind(T.MESSAGE_TYPE_REF_DELETE, "ref_delete", pb.RefDeleteBody,
                checks.ref_delete, git.ref_delete, AGENT),
    MessageKind(T.MESSAGE_TYPE_COMMIT_BUNDLE, "commit_bundle", pb.CommitBundleBody,
                checks.commit_bundle, git.commit_bundle, AGENT),
    # accounts and keys
    MessageKind(T.MESSAGE_TYPE_SIGNER_ADD, "signer_add", pb.SignerAddBody,
                checks.signer_add, accounts.signer_add, CUSTODY),
    MessageKind(T.MESSAGE_TYPE_SIGNER_REMOVE, "signer_remove", pb.SignerRemoveBody,
                checks.signer_remove, accounts.signer_remove, CUSTODY),
    MessageKind(T.MESSAGE_TYPE_KEYCHAIN_AUTHORIZE, "keychain_authorize", pb.KeychainAuthorizeBody,
                checks.keychain_authorize, accounts.keychain_authorize, CUSTODY),
    MessageKind(T.MESSAGE_TYPE_KEYCHAIN_REVOKE, "keychain_revoke", pb.KeychainRevokeBody,
                checks.keychain_revoke, accounts.keychain_revoke, CUSTODY),
    MessageKind(T.MESSAGE_TYPE_ACCOUNT_DATA, "account_data", pb.AccountDataBody,
                checks.account_data, accounts.account_data, SIGNING),
    MessageKind(T.MESSAGE_TYPE_STORAGE_GRANT, "storage_grant", pb.StorageGrantBody,
                checks.storage_grant, accounts.storage_grant, SIGNING, quota=True),
    MessageKind(T.MESSAGE_TYPE_VERIFICATION_ADD, "verification_add", pb.VerificationAddBody,
                checks.verification_add, accounts.verification_add, SIGNING, quota=True),
    MessageKind(T.MESSAGE_TYPE_VERIFICATION_REMOVE, "verification_remove", pb.VerificationRemoveBody,
                checks.verification_remove, accounts.verification_remove, SIGNING, quota=True),
    # social
    MessageKind(T.MESSAGE_TYPE_LINK_ADD, "link_add", pb.LinkAddBody,
                checks.link, social.link_add, SIGNING, quota=True),
    MessageKind(T.MESSAGE_TYPE_LINK_REMOVE, "link_remove", pb.LinkRemoveBody,
                checks.link, social.link_remove, SIGNING, quota=True),
    MessageKind(T.MESSAGE_TYPE_REACTION_ADD, "reaction_add", pb.ReactionAddBody,
                checks.reaction, social.reaction_add, SIGNING, quota=True),
    MessageKind(T.MESSAGE_TYPE_REACTION_REMOVE, "reaction_remove", pb.ReactionRemoveBody,
                checks.reaction, social.reaction_remove, SIGNING, quota=True),
)
# fmt: on

# Retired relay-era types: their numbers and names are `reserved` in message.proto.
DISABLED: Final[Mapping[int, str]] = MappingProxyType(
    {
        12: "KEY_ADD",
        13: "OWNERSHIP_TRANSFER",
        51: "STORAGE_RENT",
        62: "RELAY_SIGNER_ADD",
        63: "RELAY_SIGNER_REMOVE",
    }
)


@dataclass(frozen=True)
class Registry:
    kinds: Mapping[int, MessageKind[Any]]
    disabled: Mapping[int, str]

    @classmethod
    def of(cls, kinds: Iterable[MessageKind[Any]], disabled: Mapping[int, str]) -> Registry:
        """An immutable registry; a type registered twice, or both registered and disabled, is a bug."""
        table: dict[int, MessageKind[Any]] = {}
        for kind in kinds:
            if kind.message_type in table:
                raise InvariantBroken(f"message type {kind.name} is registered twice")
            if kind.message_type in disabled:
                raise InvariantBroken(f"message type {kind.name} is both registered and disabled")
            table[kind.message_type] = kind
        return cls(MappingProxyType(table), MappingProxyType(dict(disabled)))

    def kind_of(self, message_type: int) -> MessageKind[Any]:
        """The registered kind of `message_type`, or its typed rejection."""
        kind = self.kinds.get(message_type)
        if kind is not None:
            return kind
        if message_type in self.disabled:
            raise MessageRejected(
                Reason.DISABLED_MESSAGE_TYPE,
                f"{self.disabled[message_type]} belongs to the retired relay model",
                type=message_type,
            )
        raise MessageRejected(
            Reason.UNKNOWN_MESSAGE_TYPE, f"message type {message_type} is not known", type=message_type
        )

    def unaccounted(self) -> list[str]:
        """`MessageType` values neither registered nor disabled (UNSPECIFIED aside): must be empty."""
        return [
            name
            for name, number in T.items()
            if number != T.MESSAGE_TYPE_UNSPECIFIED and number not in self.kinds and number not in self.disabled
        ]


REGISTRY: Final = Registry.of(KINDS, DISABLED)
