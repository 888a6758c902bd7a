"""chainctl's command line: every command, flag and default, and which function runs it.

This module is all ``chainctl --help`` (and ``chainctl completion``) loads: it imports nothing but the
standard library. Each command names its handler as ``lazy(module, function)`` (node/entry.py); the handler's module
(with grpc, protobuf and the crypto libraries, ~0.6 s of imports) is imported only when the command
runs. Choice lists are spelled out here; tests/node/cli/test_cli_parser.py checks them against the
handler modules' tables.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

from node.cli.argtypes import MAX_PAGE_SIZE, UINT32_MAX, int_in, unix_time
from node.entry import lazy

if TYPE_CHECKING:
    SubParsers: TypeAlias = argparse._SubParsersAction[argparse.ArgumentParser]
else:
    SubParsers = Any

KEY_TYPES = ("ed25519", "secp256k1", "p256", "webauthn")  # node.cli.config.KEY_TYPES
DEFAULT_RP_ID = "localhost"  # node.cli.config.DEFAULT_RP_ID
SCOPES = ("agent", "owner", "signing")  # node.cli.account.SCOPES
ACCOUNT_FIELDS = ("avatar", "bio", "display_name", "website")  # node.cli.account.ACCOUNT_FIELDS
PROJECT_FIELDS = ("default_branch", "description", "topics", "visibility", "website")  # node.cli.project
PERMISSIONS = ("admin", "read", "write")  # node.cli.project.PERMISSIONS
AUTHORITY_ENV = "CHAINCTL_AUTHORITY"  # node.cli.account.AUTHORITY_ENV
DEFAULT_BUNDLE = 500  # node.sdk.push.DEFAULT_BUNDLE
QUERY_DESCRIPTION = """chainctl query RPC field=value ...: any read RPC, generically.

Arguments map onto the request message through the protobuf JSON mapping, after these conveniences:

- bytes fields take 0x-hex (or bare even-length hex); text:... or any non-hex value is taken as
  UTF-8 (so ref_name=refs/heads/main works), b64:... as base64;
- enum fields take the full name, the name without its prefix (type=STAR) or the number;
- message fields take JSON (proof=@proof.json reads a file), with bytes as 0x-hex inside too;
- a repeated field takes the argument several times (types=REF_UPDATE types=COMMIT_BUNDLE).

The answer is JSON (bytes as 0x-hex, enums by name, proto field names). --all follows
next_page_token and concatenates the repeated fields of every page.
"""


def register_all(sub: SubParsers) -> None:
    register_keys(sub)
    register_account(sub)
    register_project(sub)
    register_push(sub)
    register_query(sub)


def register_keys(sub: SubParsers) -> None:
    keys = sub.add_parser("keys", help="create, import, list and show local keys")
    ks = keys.add_subparsers(dest="keys_command", required=True, metavar="COMMAND")

    p = ks.add_parser("create", help="generate a key")
    p.add_argument("name")
    p.add_argument("--type", dest="key_type", choices=KEY_TYPES, default="ed25519")
    p.add_argument("--rp-id", default=DEFAULT_RP_ID, help="webauthn: relying-party id")
    p.add_argument("--origin", default="", help="webauthn: origin the authenticator reports (default https://RP_ID)")
    p.set_defaults(func=lazy("node.cli.keys", "keys_create"))

    p = ks.add_parser("import", help="import a private key (hex from --private-key, --private-key-file or stdin)")
    p.add_argument("name")
    p.add_argument("--type", dest="key_type", choices=KEY_TYPES, required=True)
    p.add_argument("--private-key", default="", help="32-byte private key, hex")
    p.add_argument("--private-key-file", type=Path, default=None)
    p.add_argument("--rp-id", default=DEFAULT_RP_ID)
    p.add_argument("--origin", default="")
    p.set_defaults(func=lazy("node.cli.keys", "keys_import"))

    p = ks.add_parser("list", help="list keys (public parts)")
    p.set_defaults(func=lazy("node.cli.keys", "keys_list"))

    p = ks.add_parser("show", help="address and public key of a key")
    p.add_argument("name")
    p.set_defaults(func=lazy("node.cli.keys", "keys_show"))

    p = ks.add_parser("delete", help="delete a key file")
    p.add_argument("name")
    p.set_defaults(func=lazy("node.cli.keys", "keys_delete"))


def register_account(sub: SubParsers) -> None:
    account = sub.add_parser("account", help="accounts: delegated keys, custody keys, storage, profile")
    acs = account.add_subparsers(dest="account_command", required=True, metavar="COMMAND")

    p = acs.add_parser("init", help="register a delegated Ed25519 key, authorized by a custody key (wallet/passkey)")
    p.add_argument("--wallet", required=True, help="custody key name (secp256k1, p256 or webauthn)")
    p.add_argument("--key", default="", help="ed25519 key to register (created if missing; default WALLET-signer)")
    p.add_argument("--owner", default="", help="account address (default: the account the wallet is custody of)")
    p.add_argument("--no-default", action="store_true", help="do not make this the default account")
    p.set_defaults(func=lazy("node.cli.account", "account_init"))

    p = acs.add_parser("use", help="make an initialized account the default")
    p.add_argument("account", help="address or wallet/signer key name")
    p.set_defaults(func=lazy("node.cli.account", "account_use"))

    p = acs.add_parser("list", help="accounts initialized in this key store")
    p.set_defaults(func=lazy("node.cli.account", "account_list"))

    p = acs.add_parser("authorize-custody", help="add a custody key to the keychain (KEYCHAIN_AUTHORIZE)")
    p.add_argument("--wallet", required=True, help="an admin custody key of the account")
    p.add_argument("--key", required=True, help="the custody key to authorize")
    p.add_argument("--admin", action="store_true")
    p.add_argument(
        "--expires-at", type=unix_time, default="0", help="unix seconds, or +SECONDS from now (non-admin keys)"
    )
    p.add_argument("--owner", default="")
    p.set_defaults(func=lazy("node.cli.account", "account_authorize_custody"))

    p = acs.add_parser("revoke-custody", help="revoke a custody key (KEYCHAIN_REVOKE)")
    p.add_argument("--wallet", required=True)
    p.add_argument("--key", required=True, help="key name or 0x key id")
    p.add_argument("--owner", default="")
    p.set_defaults(func=lazy("node.cli.account", "account_revoke_custody"))

    p = acs.add_parser("add-key", help="register another delegated key (SIGNER_ADD)")
    p.add_argument("--wallet", required=True)
    p.add_argument("--key", required=True, help="ed25519 key name (created if missing)")
    p.add_argument("--scope", choices=list(SCOPES), default="signing")
    p.add_argument("--project", action="append", default=[], help="allowed project (agent keys; repeatable)")
    p.add_argument("--owner", default="")
    p.set_defaults(func=lazy("node.cli.account", "account_add_key"))

    p = acs.add_parser("remove-key", help="remove a delegated key (SIGNER_REMOVE)")
    p.add_argument("--wallet", required=True)
    p.add_argument("--key", required=True, help="ed25519 key name or 0x public key")
    p.add_argument("--owner", default="")
    p.set_defaults(func=lazy("node.cli.account", "account_remove_key"))

    p = acs.add_parser("fund", help="grant storage units from a storage authority (devnet: devnet-authority.json)")
    p.add_argument("address", help="recipient: address or key/account name")
    p.add_argument("--units", type=int_in(0, UINT32_MAX), default=1, help=f"storage units, 0-{UINT32_MAX}")
    p.add_argument("--authority", type=Path, default=None, help=f"authority key file (env {AUTHORITY_ENV})")
    p.set_defaults(func=lazy("node.cli.account", "account_fund"))

    p = acs.add_parser("show", help="account state, keys and storage (GetAccount)")
    p.add_argument("address", nargs="?", default="")
    p.set_defaults(func=lazy("node.cli.account", "account_show"))

    p = acs.add_parser("set", help="set a profile field (ACCOUNT_DATA)")
    p.add_argument("field", choices=list(ACCOUNT_FIELDS))
    p.add_argument("value")
    p.set_defaults(func=lazy("node.cli.account", "account_set"))


def register_project(sub: SubParsers) -> None:
    project = sub.add_parser("project", help="create, list, show, fork, archive projects; collaborators")
    ps = project.add_subparsers(dest="project_command", required=True, metavar="COMMAND")
    _register_project(ps)
    _register_collaborator(ps)
    _register_social(sub)
    _register_mr(sub)


def _register_project(ps: SubParsers) -> None:
    p = ps.add_parser("create", help="create a project (its id is the message hash)")
    p.add_argument("name")
    p.add_argument("--description", default="")
    p.add_argument("--private", action="store_true")
    p.set_defaults(func=lazy("node.cli.project", "project_create"))

    p = ps.add_parser("list", help="list projects (all live projects, or one owner's)")
    p.add_argument("--owner", default="", help="address or key/account name")
    p.add_argument("--all", action="store_true", help="follow pagination")
    p.add_argument("--limit", type=int_in(1, MAX_PAGE_SIZE), default=50, help=f"projects per page, 1-{MAX_PAGE_SIZE}")
    p.set_defaults(func=lazy("node.cli.project", "project_list"))

    p = ps.add_parser("show", help="a project by 0x id, OWNER/NAME or NAME (current account)")
    p.add_argument("project")
    p.set_defaults(func=lazy("node.cli.project", "project_show"))

    p = ps.add_parser("fork", help="fork a project under the current account")
    p.add_argument("source")
    p.add_argument("name")
    p.set_defaults(func=lazy("node.cli.project", "project_fork"))

    p = ps.add_parser("archive", help="archive (or --undo: unarchive) a project")
    p.add_argument("project")
    p.add_argument("--undo", action="store_true")
    p.set_defaults(func=lazy("node.cli.project", "project_archive"))

    p = ps.add_parser("remove", help="remove a project (irreversible; releases its name)")
    p.add_argument("project")
    p.set_defaults(func=lazy("node.cli.project", "project_remove"))

    p = ps.add_parser("set", help="set a metadata field (PROJECT_METADATA)")
    p.add_argument("project")
    p.add_argument("field", choices=list(PROJECT_FIELDS))
    p.add_argument("value", help="visibility: public|private")
    p.set_defaults(func=lazy("node.cli.project", "project_set"))

    p = ps.add_parser("refs", help="a project's branches and tags (ListRefs, names decoded)")
    p.add_argument("project")
    p.set_defaults(func=lazy("node.cli.project", "project_refs"))


def _register_collaborator(ps: SubParsers) -> None:
    collab = ps.add_parser("collaborator", help="add, remove or list collaborators")
    cs = collab.add_subparsers(dest="collaborator_command", required=True, metavar="COMMAND")
    p = cs.add_parser("add", help="give an address a permission on a project (COLLABORATOR_ADD)")
    p.add_argument("project")
    p.add_argument("address")
    p.add_argument("--permission", choices=list(PERMISSIONS), default="write")
    p.set_defaults(func=lazy("node.cli.project", "collaborator_add"))
    p = cs.add_parser("remove", help="take a collaborator's permission away (COLLABORATOR_REMOVE)")
    p.add_argument("project")
    p.add_argument("address")
    p.set_defaults(func=lazy("node.cli.project", "collaborator_remove"))
    p = cs.add_parser("list", help="a project's collaborators and their permissions")
    p.add_argument("project")
    p.set_defaults(func=lazy("node.cli.project", "collaborator_list"))


def _register_social(sub: SubParsers) -> None:
    for name, remove in (("star", False), ("unstar", True)):
        p = sub.add_parser(name, help=f"{name} a project")
        p.add_argument("project")
        p.set_defaults(func=lazy("node.cli.project", "star"), remove=remove)
    for name, remove in (("follow", False), ("unfollow", True)):
        p = sub.add_parser(name, help=f"{name} an account")
        p.add_argument("address")
        p.set_defaults(func=lazy("node.cli.project", "follow"), remove=remove)
    for name, remove in (("like", False), ("unlike", True)):
        p = sub.add_parser(name, help=f"{name} a commit")
        p.add_argument("project")
        p.add_argument("commit", help="0x chain hash (32 bytes), or a git revision with --repo")
        p.add_argument("--repo", default="", help="git repository to map a revision through")
        p.set_defaults(func=lazy("node.cli.project", "like"), remove=remove)


def _register_mr(sub: SubParsers) -> None:
    mr = sub.add_parser("mr", help="merge requests")
    ms = mr.add_subparsers(dest="mr_command", required=True, metavar="COMMAND")
    p = ms.add_parser("open", help="open a merge request from SOURCE into TARGET")
    p.add_argument("target")
    p.add_argument("source")
    p.add_argument("--source-ref", required=True, help="branch name or full ref")
    p.add_argument("--target-ref", required=True)
    p.add_argument("--title", default="")
    p.add_argument("--description", default="")
    p.set_defaults(func=lazy("node.cli.project", "mr_open"))
    p = ms.add_parser("close", help="close (or --merged: mark merged) a merge request")
    p.add_argument("target")
    p.add_argument("request_id")
    p.add_argument("--merged", action="store_true")
    p.set_defaults(func=lazy("node.cli.project", "mr_close"))
    p = ms.add_parser("list", help="open merge requests of a project")
    p.add_argument("project")
    p.set_defaults(func=lazy("node.cli.project", "mr_list"))
    p = ms.add_parser("show", help="one merge request by id (GetMergeRequest)")
    p.add_argument("project")
    p.add_argument("request_id")
    p.set_defaults(func=lazy("node.cli.project", "mr_show"))


def register_push(sub: SubParsers) -> None:
    p = sub.add_parser("push", help="push a git repository's commits and branches/tags to a project")
    p.add_argument("repo_path", nargs="?", default=".", help="the git repository (default: the current directory)")
    p.add_argument("--project", required=True, help="0x project id, OWNER/NAME or NAME")
    p.add_argument(
        "--ref",
        action="append",
        default=[],
        help="refspec to push: NAME, SRC:DST, +SRC:DST (force this one) or :DST (delete DST on chain); "
        "repeatable (default: every branch and tag)",
    )
    p.add_argument("--force", action="store_true", help="allow non-fast-forward ref updates")
    p.add_argument(
        "--prune", action="store_true", help="delete the chain's branches and tags that no longer exist locally"
    )
    p.add_argument(
        "--batch",
        type=int,
        default=DEFAULT_BUNDLE,
        help="commits per COMMIT_BUNDLE (1-1000)",
    )
    p.add_argument("--dry-run", action="store_true", help="show what would be sent; send nothing")
    p.set_defaults(func=lazy("node.cli.push", "push"))

    p = sub.add_parser("git-hash", help="the chain hashes of git revisions (the push mapping)")
    p.add_argument("repo_path", nargs="?", default=".", help="the git repository (default: the current directory)")
    p.add_argument("revs", nargs="*", default=["HEAD"])
    p.set_defaults(func=lazy("node.cli.githash", "git_hash"))


def register_query(sub: SubParsers) -> None:
    p = sub.add_parser(
        "query",
        help="call any read RPC: chainctl query GetProject project_id=0x...",
        description=QUERY_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("rpc", nargs="?", default="", help="RPC name (GetRef, get-ref, getref)")
    p.add_argument("fields", nargs="*", metavar="field=value")
    p.add_argument("--all", action="store_true", help="follow pagination to the last page")
    p.add_argument("--list", action="store_true", help="list the RPCs and their request fields")
    p.set_defaults(func=lazy("node.cli.query", "query"))
