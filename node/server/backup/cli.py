"""`chain-node backup {create,list,prune,restore}`: off-cluster backups in S3-compatible object storage.

    chain-node backup create  --node [grpcs://]HOST:PORT --url s3://BUCKET/PREFIX [--snapshot NAME]
                              [--ca-file CA --tls-cert CERT --tls-key KEY]
    chain-node backup list    --url s3://BUCKET/PREFIX [--network devnet] [--all]
    chain-node backup prune   --url s3://BUCKET/PREFIX --keep N [--grace-seconds S]
    chain-node backup restore --from s3://BUCKET/PREFIX[/NETWORK/NAME] --data-dir DIR [--reinitialize]
    chain-node backup etcd    --url s3://BUCKET/PREFIX --file SNAPSHOT.db --keep N [--network devnet]

Every flag is also an environment variable (`CHAIN_BACKUP_URL`, `CHAIN_BACKUP_S3_ENDPOINT`, ...); the
credentials are boto3's own (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, or a credentials file) and are never
flags, never printed. Success: one JSON document on stdout, exit 0. Failure: one line on stderr,
`chain-node backup VERB: REASON: what`, exit 1 (reasons: node/errors.py BackupReason); usage errors exit 2.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

from node.entry import lazy
from node.envflags import describe_env, env_defaults
from node.errors import BackupFailed
from node.observability.logs import configure_logging
from node.server.backup.etcd import upload_etcd
from node.server.backup.layout import PART_BYTES, Location
from node.server.backup.objstore import Bucket, connect
from node.server.backup.prune import DEFAULT_GRACE_SECONDS, listing, prune
from node.server.backup.restore import restore

PREFIX = "CHAIN_BACKUP_"
EXIT_FAILED, EXIT_USAGE = 1, 2
TLS_SCHEMES = ("grpcs://", "https://")  # node.tls.parse_target's TLS targets
# grpc loads with `create` only, after GRPC_VERBOSITY defaults to NONE: a failed handshake is this command's one
# line, not gRPC's log lines too
CREATE = lazy("node.server.backup.create", "create_with_flags")


def _common(p: argparse.ArgumentParser, *, url_flags: tuple[str, ...] = ("--url",)) -> None:
    p.add_argument(*url_flags, dest="url", default="", help="s3://BUCKET/PREFIX where backups go")
    p.add_argument("--s3-endpoint", default="", help="endpoint of an S3-compatible server (empty: AWS S3)")
    p.add_argument("--s3-region", default="", help="region (empty: AWS_REGION, else us-east-1)")
    p.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])


def _network(p: argparse.ArgumentParser) -> None:
    p.add_argument("--network", default="devnet", help="the network whose backups are meant")


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="chain-node backup", description=__doc__.split("\n\n")[0])
    verbs = top.add_subparsers(dest="verb", required=True)
    c = verbs.add_parser("create", help="copy a node's newest (or a named) snapshot to the bucket")
    c.add_argument(
        "--node",
        default="",
        help="the node's internal listener (its SnapshotSyncService): HOST:PORT, or grpcs://HOST:PORT for TLS",
    )
    c.add_argument("--ca-file", type=Path, default=None, help="PEM CA the node's certificate must chain to")
    c.add_argument("--tls-cert", type=Path, default=None, help="PEM client certificate signed by the cluster's CA")
    c.add_argument("--tls-key", type=Path, default=None, help="PEM private key of --tls-cert")
    c.add_argument("--snapshot", default="", help="the snapshot's name on the node (empty: its newest)")
    c.add_argument("--part-bytes", type=int, default=PART_BYTES, help="multipart part size (S3: 5 MiB or more)")
    c.add_argument("--timeout", type=float, default=3600.0, help="seconds the transfer may take")
    _common(c)
    ls = verbs.add_parser("list", help="the network's complete backups, oldest first")
    ls.add_argument("--all", action="store_true", help="also list incomplete ones (interrupted uploads)")
    _network(ls)
    _common(ls)
    pr = verbs.add_parser("prune", help="keep the newest N complete backups; remove stale leftovers")
    pr.add_argument("--keep", type=int, default=0, help="complete backups to keep (at least 1)")
    pr.add_argument(
        "--grace-seconds", type=float, default=DEFAULT_GRACE_SECONDS,
        help="incomplete uploads older than this are removed",
    )  # fmt: skip
    _network(pr)
    _common(pr)
    r = verbs.add_parser("restore", help="put a backup in place as an empty data dir's store")
    r.add_argument("--data-dir", type=Path, default=None, help="the node's data dir (must hold no store)")
    r.add_argument("--reinitialize", action="store_true", help="move a store already there aside first")
    r.add_argument("--expect-state-root", default="", help="refuse a backup whose state root is not this (hex)")
    r.add_argument("--timeout", type=float, default=3600.0, help="seconds the download may take")
    _network(r)
    _common(r, url_flags=("--url", "--from"))  # env: CHAIN_BACKUP_URL, like the other verbs
    e = verbs.add_parser("etcd", help="upload an etcd snapshot file beside the chain's backups; keep the newest N")
    e.add_argument("--file", type=Path, default=None, help="the etcd snapshot (etcdctl snapshot save)")
    e.add_argument("--keep", type=int, default=0, help="etcd snapshots to keep in the bucket (at least 1)")
    e.add_argument(
        "--grace-seconds", type=float, default=DEFAULT_GRACE_SECONDS,
        help="uploads never completed older than this are aborted",
    )  # fmt: skip
    _network(e)
    _common(e)
    for sub in (c, ls, pr, r, e):
        describe_env(sub, PREFIX)
        env_defaults(sub, PREFIX, os.environ)
    return top


def _bucket(args: argparse.Namespace) -> tuple[Bucket, Location]:
    location = Location.parse(args.url)
    region = args.s3_region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
    return Bucket(connect(args.s3_endpoint or None, region), location.bucket), location


def _run(args: argparse.Namespace) -> object:
    bucket, location = _bucket(args)
    if args.verb == "create":
        done = CREATE.resolve()(
            args.node, bucket, location, snapshot=args.snapshot, part_bytes=args.part_bytes, timeout=args.timeout,
            ca_file=args.ca_file, tls_cert=args.tls_cert, tls_key=args.tls_key,
        )  # fmt: skip
        return {"event": "backup-created", **asdict(done)}
    if args.verb == "list":
        backups = [b.to_json() for b in listing(bucket, location, args.network) if b.complete or args.all]
        return {"event": "backups", "url": location.url(), "network": args.network, "backups": backups}
    if args.verb == "prune":
        pruned = prune(bucket, location, args.network, keep=args.keep, grace_seconds=args.grace_seconds)
        return {"event": "backups-pruned", **asdict(pruned)}
    if args.verb == "etcd":
        up = upload_etcd(bucket, location, args.network, args.file, keep=args.keep, grace_seconds=args.grace_seconds)
        return {"event": "etcd-backup-uploaded", **asdict(up)}
    expect = bytes.fromhex(args.expect_state_root) if args.expect_state_root else None
    done_r = restore(bucket, location, args.network, args.data_dir, reinitialize=args.reinitialize,
                     expect_root=expect, timeout=args.timeout)  # fmt: skip
    return {"event": "backup-restored", **asdict(done_r)}


def _usage(args: argparse.Namespace) -> str | None:
    if not args.url:
        return "--url (or --from) s3://BUCKET/PREFIX is required"
    if args.verb == "create" and not args.node.strip():
        return "--node HOST:PORT is required"
    if args.verb == "create" and not args.node.strip().startswith(TLS_SCHEMES) and (args.ca_file or args.tls_cert):
        return f"--ca-file and --tls-cert are for a TLS node, and --node {args.node} is plaintext: use grpcs://"
    if args.verb == "prune" and args.keep < 1:
        return "--keep N (at least 1) is required"
    if args.verb == "etcd" and (args.file is None or args.keep < 1):
        return "--file SNAPSHOT.db and --keep N (at least 1) are required"
    if args.verb == "restore" and args.data_dir is None:
        return "--data-dir is required"
    if args.verb == "restore" and args.expect_state_root:
        try:
            bytes.fromhex(args.expect_state_root)
        except ValueError:
            return "--expect-state-root is not hex"
    return None


def main(argv: Sequence[str]) -> int:
    args = parser().parse_args(argv)
    prog = f"chain-node backup {args.verb}"
    problem = _usage(args)
    if problem:
        print(f"{prog}: {problem}", file=sys.stderr, flush=True)
        return EXIT_USAGE
    os.environ.setdefault("GRPC_VERBOSITY", "NONE")
    configure_logging(args.log_level, "text")
    logging.getLogger("botocore").setLevel(logging.WARNING)  # its debug lines would show request headers
    try:
        doc = _run(args)
    except BackupFailed as err:
        print(f"{prog}: {err}", file=sys.stderr, flush=True)
        return EXIT_FAILED
    print(json.dumps(doc, default=str), flush=True)
    return 0
