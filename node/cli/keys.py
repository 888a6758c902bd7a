"""``chainctl keys``: the local key store."""

from __future__ import annotations

import sys
from typing import Any

from node.cli import config
from node.cli.common import CliError, Context, parse_hex


def _summary(doc: dict[str, Any]) -> str:
    ident = doc["address"] or doc["public_key"]
    return f"{doc['name']}\t{doc['type']}\t{ident}"


def keys_create(ctx: Context, args: Any) -> None:
    key = config.generate(config.check_name(args.name), args.key_type, rp_id=args.rp_id, origin=args.origin)
    ctx.store.add(key)
    doc = key.public_json()
    doc["path"] = str(ctx.store.path(key.name))
    ctx.emit(doc, [f"created {key.type} key {key.name}", *_lines(doc)])


def keys_import(ctx: Context, args: Any) -> None:
    if args.private_key:
        text = args.private_key
    elif args.private_key_file is not None:
        text = args.private_key_file.read_text(encoding="utf-8")
    else:
        text = sys.stdin.readline()
    private = parse_hex(text.strip(), 32, "private key")
    key = config.from_private(
        config.check_name(args.name), args.key_type, private, rp_id=args.rp_id, origin=args.origin
    )
    ctx.store.add(key)
    doc = key.public_json()
    doc["path"] = str(ctx.store.path(key.name))
    ctx.emit(doc, [f"imported {key.type} key {key.name}", *_lines(doc)])


def keys_list(ctx: Context, args: Any) -> int:
    """Every key that can be read; each key file that cannot is named on stderr (one ``error:`` line each, and
    under ``unreadable`` with --json), and then the exit status is 1."""
    keys, problems = ctx.store.scan()
    docs = [k.public_json() for k in keys]
    bad = [{"reason": p.reason, "message": str(p)} for p in problems]
    if keys or not problems:
        text = [_summary(d) for d in docs] or ["no keys; create one with `chainctl keys create NAME`"]
    else:
        text = []
    ctx.emit({"keys": docs, "unreadable": bad} if bad else {"keys": docs}, text)
    for item in bad:
        ctx.err.write(f"error: {item['reason']}: {item['message']}\n")
    return 1 if bad else 0


def keys_show(ctx: Context, args: Any) -> None:
    doc = ctx.store.get(args.name).public_json()
    ctx.emit(doc, _lines(doc))


def keys_delete(ctx: Context, args: Any) -> None:
    ctx.store.delete(args.name)
    ctx.emit({"deleted": args.name}, f"deleted key {args.name}")


def _lines(doc: dict[str, Any]) -> list[str]:
    lines = [f"name: {doc['name']}", f"type: {doc['type']}"]
    if doc.get("address"):
        lines.append(f"address: {doc['address']}")
    lines.append(f"public_key: {doc['public_key']}")
    if doc["type"] == "webauthn":
        lines.append(f"rp_id: {doc['rp_id']}")
        lines.append(f"origin: {doc['origin']}")
    return lines


def need_custody(ctx: Context, name: str) -> config.StoredKey:
    key = ctx.store.get(name)
    if not key.is_custody:
        raise CliError(
            "WRONG_KEY_TYPE", f"key {name!r} is {key.type}; a custody key (secp256k1, p256, webauthn) is needed"
        )
    return key
