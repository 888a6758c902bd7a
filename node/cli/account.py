"""``chainctl account``: delegated keys, the custody keychain, storage, profile fields."""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import MappingProxyType
from typing import Any

from chain.v1 import message_pb2 as pb
from chain.v1 import rpc_pb2
from node import constants as C
from node.cli import config
from node.cli.common import CliError, Context, hex0x, is_hex_of, parse_hex
from node.cli.keys import need_custody
from node.cli.protojson import committed_json, to_json
from node.errors import CliCode
from node.sdk.authority import Authority
from node.sdk.keys import Ed25519Key, Secp256k1Key
from node.sdk.messages import MessageBuilder

AUTHORITY_ENV = "CHAINCTL_AUTHORITY"
AUTHORITY_KEYS = ("wallet_private_key", "ed25519_private_key")  # node.authority.Authority.to_json
SCOPES = MappingProxyType({"owner": pb.KEY_SCOPE_OWNER, "signing": pb.KEY_SCOPE_SIGNING, "agent": pb.KEY_SCOPE_AGENT})
ACCOUNT_FIELDS = MappingProxyType(
    {
        "display_name": pb.ACCOUNT_FIELD_DISPLAY_NAME,
        "avatar": pb.ACCOUNT_FIELD_AVATAR,
        "bio": pb.ACCOUNT_FIELD_BIO,
        "website": pb.ACCOUNT_FIELD_WEBSITE,
    }
)


# ---- helpers ----


def custody_owner(ctx: Context, wallet: config.StoredKey, explicit: str) -> bytes:
    """The account a custody key acts for: --owner, else what the profile recorded, else its own address."""
    if explicit:
        return ctx.address(explicit)
    recorded = ctx.profile.custody.get(wallet.name)
    if recorded is not None:
        return recorded
    address = wallet.address
    assert address is not None
    return address


def custody_nonce(ctx: Context, owner: bytes) -> int:
    resp = ctx.client.stub.GetAccount(rpc_pb2.GetAccountRequest(owner_address=owner), timeout=ctx.timeout)
    return int(resp.account.custody_nonce)


def envelope_builder(ctx: Context, owner: bytes) -> MessageBuilder:
    """Custody-authorized messages skip the delegated-key lookup: sign the envelope with the account's
    delegated key when this store has one, else with a throwaway key."""
    entry = ctx.profile.accounts.get(owner)
    signer = ctx.store.get(entry.signer).ed25519() if entry is not None else Ed25519Key.generate()
    return ctx.builder(owner, signer)


def ed25519_key(ctx: Context, name: str) -> config.StoredKey:
    """An ed25519 key of the store, created when missing."""
    if ctx.store.exists(name):
        key = ctx.store.get(name)
        key.ed25519()
        return key
    return ctx.store.add(config.generate(config.check_name(name), "ed25519"))


def _free_name(ctx: Context, base: str) -> str:
    name = base
    n = 2
    while ctx.store.exists(name):
        name = f"{base}-{n}"
        n += 1
    return name


def load_authority(path: Path) -> Authority:
    """A storage authority's key file (node.authority's format), or INVALID_ARGUMENT saying what the file is
    instead: missing, unreadable, not JSON, a chainctl key file, keys that are not keys."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CliError(CliCode.INVALID_ARGUMENT, f"authority file {path} not found") from None
    except OSError as exc:
        raise CliError(CliCode.INVALID_ARGUMENT, f"authority file {path}: cannot read it: {exc.strerror}") from None
    except ValueError as exc:  # not UTF-8, not JSON
        raise CliError(CliCode.INVALID_ARGUMENT, f"authority file {path} is not JSON ({exc})") from None
    missing = [k for k in AUTHORITY_KEYS if not isinstance(doc, dict) or not isinstance(doc.get(k), str)]
    if missing:
        what = "a chainctl key file" if isinstance(doc, dict) and "private_key" in doc else "not an authority file"
        raise CliError(
            CliCode.INVALID_ARGUMENT,
            f"authority file {path} is {what}: it has no {' or '.join(missing)}; "
            "a devnet's authority file is DATA_DIR/devnet-authority.json",
        )
    try:
        wallet = Secp256k1Key.from_private_bytes(bytes.fromhex(doc["wallet_private_key"]))
        key = Ed25519Key.from_private_bytes(bytes.fromhex(doc["ed25519_private_key"]))
    except ValueError as exc:
        raise CliError(CliCode.INVALID_ARGUMENT, f"authority file {path}: not a usable key ({exc})") from None
    return Authority(wallet, key)


# ---- commands ----


def account_init(ctx: Context, args: Any) -> None:
    wallet = need_custody(ctx, args.wallet)
    owner = custody_owner(ctx, wallet, args.owner)
    key_name = args.key or _free_name(ctx, f"{wallet.name}-signer")
    stored = ed25519_key(ctx, key_name)
    key = stored.ed25519()
    nonce = custody_nonce(ctx, owner)
    msg = ctx.builder(owner, key).signer_add(wallet.custody(), nonce, key=key, scope=pb.KEY_SCOPE_OWNER)
    committed = ctx.submit([msg])[0]
    profile = ctx.profile
    profile.accounts[owner] = config.AccountEntry(owner, stored.name, wallet.name)
    profile.custody[wallet.name] = owner
    if not args.no_default or profile.default is None:
        profile.default = owner
    profile.save()
    doc = {
        "owner_address": hex0x(owner),
        "key": stored.name,
        "public_key": hex0x(key.public_key),
        "custody_key": wallet.name,
        "custody_nonce": nonce,
        "default": profile.default == owner,
        **committed_json(committed),
    }
    ctx.emit(
        doc,
        [
            f"account {hex0x(owner)} initialized",
            f"delegated key {stored.name} ({hex0x(key.public_key)}) registered with scope owner",
            f"authorized by custody key {wallet.name} (custody nonce {nonce}), block {committed.block_number}",
        ],
    )


def account_use(ctx: Context, args: Any) -> None:
    entry = ctx.profile.find(args.account)
    if entry is None:
        raise CliError(CliCode.ACCOUNT_NOT_INITIALIZED, f"no initialized account {args.account!r}")
    ctx.profile.default = entry.owner
    ctx.profile.save()
    ctx.emit({"default": hex0x(entry.owner)}, f"default account: {hex0x(entry.owner)}")


def account_list(ctx: Context, args: Any) -> None:
    profile = ctx.profile
    docs = [
        {"owner_address": hex0x(o), "signer": e.signer, "wallet": e.wallet, "default": o == profile.default}
        for o, e in sorted(profile.accounts.items())
    ]
    lines = [
        f"{'*' if d['default'] else ' '} {d['owner_address']}\tsigner {d['signer']}\twallet {d['wallet']}" for d in docs
    ]
    ctx.emit({"accounts": docs}, lines or ["no accounts; run `chainctl account init --wallet NAME`"])


def account_authorize_custody(ctx: Context, args: Any) -> None:
    wallet = need_custody(ctx, args.wallet)
    new = need_custody(ctx, args.key)
    owner = custody_owner(ctx, wallet, args.owner)
    expires_at = int(args.expires_at)  # node.cli.argtypes.unix_time
    nonce = custody_nonce(ctx, owner)
    msg = envelope_builder(ctx, owner).keychain_authorize(
        wallet.custody(), nonce, new.custody(), admin=args.admin, expires_at=expires_at
    )
    committed = ctx.submit([msg])[0]
    ctx.profile.custody[new.name] = owner
    ctx.profile.save()
    key_id = new.address or b""
    doc = {
        "owner_address": hex0x(owner),
        "key": new.name,
        "key_id": hex0x(key_id),
        "signature_type": new.type,
        "admin": bool(args.admin),
        "expires_at": expires_at,
        **committed_json(committed),
    }
    ctx.emit(doc, f"custody key {new.name} ({hex0x(key_id)}) authorized for {hex0x(owner)}")


def account_revoke_custody(ctx: Context, args: Any) -> None:
    wallet = need_custody(ctx, args.wallet)
    owner = custody_owner(ctx, wallet, args.owner)
    if is_hex_of(args.key, C.ADDRESS_LEN):
        key_id = parse_hex(args.key, C.ADDRESS_LEN, "key id")
    else:
        address = need_custody(ctx, args.key).address
        assert address is not None
        key_id = address
    nonce = custody_nonce(ctx, owner)
    committed = ctx.submit([envelope_builder(ctx, owner).keychain_revoke(wallet.custody(), nonce, key_id)])[0]
    doc = {"owner_address": hex0x(owner), "key_id": hex0x(key_id), **committed_json(committed)}
    ctx.emit(doc, f"custody key {hex0x(key_id)} revoked for {hex0x(owner)}")


def account_add_key(ctx: Context, args: Any) -> None:
    wallet = need_custody(ctx, args.wallet)
    owner = custody_owner(ctx, wallet, args.owner)
    stored = ed25519_key(ctx, args.key)
    key = stored.ed25519()
    projects = [ctx.project_id(p) for p in args.project]
    nonce = custody_nonce(ctx, owner)
    msg = ctx.builder(owner, key).signer_add(
        wallet.custody(), nonce, key=key, scope=SCOPES[args.scope], allowed_projects=projects
    )
    committed = ctx.submit([msg])[0]
    doc = {
        "owner_address": hex0x(owner),
        "key": stored.name,
        "public_key": hex0x(key.public_key),
        "scope": args.scope,
        "allowed_projects": [hex0x(p) for p in projects],
        **committed_json(committed),
    }
    ctx.emit(doc, f"delegated key {stored.name} ({hex0x(key.public_key)}) added with scope {args.scope}")


def account_remove_key(ctx: Context, args: Any) -> None:
    wallet = need_custody(ctx, args.wallet)
    owner = custody_owner(ctx, wallet, args.owner)
    if is_hex_of(args.key, C.ED25519_KEY_LEN):
        public = parse_hex(args.key, C.ED25519_KEY_LEN, "public key")
    else:
        public = ctx.store.get(args.key).ed25519().public_key
    nonce = custody_nonce(ctx, owner)
    committed = ctx.submit([envelope_builder(ctx, owner).signer_remove(wallet.custody(), nonce, public)])[0]
    entry = ctx.profile.accounts.get(owner)
    if entry is not None and ctx.store.exists(entry.signer) and ctx.store.get(entry.signer).public_key == public:
        ctx.note(f"warning: {entry.signer} was this account's signer; run `chainctl account init` with another key")
    doc = {"owner_address": hex0x(owner), "public_key": hex0x(public), **committed_json(committed)}
    ctx.emit(doc, f"delegated key {hex0x(public)} removed from {hex0x(owner)}")


def account_fund(ctx: Context, args: Any) -> None:
    path = args.authority or (Path(os.environ[AUTHORITY_ENV]) if os.environ.get(AUTHORITY_ENV) else None)
    if path is None:
        raise CliError(CliCode.INVALID_ARGUMENT, f"--authority FILE is required (or set {AUTHORITY_ENV})")
    authority = load_authority(Path(path))
    recipient = ctx.address(args.address)
    msg = ctx.builder(authority.wallet.address, authority.key).storage_grant(recipient, args.units)
    committed = ctx.submit([msg])[0]
    units = ctx.client.stub.GetAccount(
        rpc_pb2.GetAccountRequest(owner_address=recipient), timeout=ctx.timeout
    ).storage_units
    doc = {
        "recipient": hex0x(recipient),
        "units": args.units,
        "grant_id": hex0x(bytes(committed.message.hash)),
        "storage_units": units,
        "block_number": committed.block_number,
    }
    ctx.emit(doc, f"granted {args.units} storage unit(s) to {hex0x(recipient)}; it now has {units}")


def account_show(ctx: Context, args: Any) -> None:
    owner = ctx.address(args.address) if args.address else ctx.account().owner
    resp = ctx.client.stub.GetAccount(rpc_pb2.GetAccountRequest(owner_address=owner), timeout=ctx.timeout)
    ctx.emit(to_json(resp))


def account_set(ctx: Context, args: Any) -> None:
    b = ctx.account_builder()
    committed = ctx.submit([b.account_data(ACCOUNT_FIELDS[args.field], args.value)])[0]
    doc = {"owner_address": hex0x(b.owner), "field": args.field, "value": args.value, **committed_json(committed)}
    ctx.emit(doc, f"{args.field} set")
