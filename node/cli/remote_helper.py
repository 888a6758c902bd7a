"""``git-remote-chain``: git's remote helper for ``chain://`` remotes (push only).

    git remote add chain chain://HOST:PORT/OWNER/PROJECT
    git push chain main            git push chain :old         git push --force chain main
    git push --tags chain          git push --prune chain 'refs/heads/*:refs/heads/*'

git runs ``git-remote-chain REMOTE URL`` with the repository in ``GIT_DIR`` and talks to it over
stdin/stdout (gitremote-helpers(7)). This helper implements ``capabilities``, ``list`` (and ``list
for-push``), ``option`` and ``push``; a ``fetch`` fails with one line: the chain records commit metadata
and refs, never git objects. Pushing is node.sdk.push with ``strict=False``, so each ref gets its own
``ok``/``error`` line and git prints its usual table, hints and exit code.

URL: ``chain://HOST[:PORT]/OWNER/PROJECT`` (OWNER an 0x address or a key/account name of the key store;
PORT defaults to 50051) or ``chain://HOST[:PORT]/0xPROJECT_ID``: plaintext gRPC. Over TLS the remote is
``chain::grpcs://HOST[:PORT]/OWNER/PROJECT`` (git runs this helper with the address after ``chain::``), the
node's certificate checked against ``CHAINCTL_CA_FILE`` (else the system's roots). Keys and account come from chainctl's
key store, exactly as chainctl finds them: ``CHAINCTL_HOME`` (default ``~/.chainctl``), the account
named by ``CHAINCTL_ACCOUNT`` (address or key name) or else the store's default account.

``list`` reports each chain ref as the git id in its commit's ``content_digest``; when the local
repository has a ref of that name that peels to that commit (an annotated tag), the local ref's own id,
so git sees an unchanged tag as up to date.

This module is the entry point and reads the URL with the standard library only; the work (grpc, protobuf,
the SDK) is in node.cli.remote_serve, imported after ``GRPC_VERBOSITY`` defaults to NONE, so a failed TLS
handshake is the helper's one line and not gRPC's log lines too.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from node.cli.address import AddressError, node_target
from node.entry import lazy

ACCOUNT_ENV = "CHAINCTL_ACCOUNT"
CA_FILE_ENV = "CHAINCTL_CA_FILE"
NO_OBJECTS = "chain remotes hold no git objects (only commit metadata and refs): fetch from a git server instead"
URL_SCHEMES = ("chain", "grpc", "grpcs")
RUN = lazy("node.cli.remote_serve", "run")


class HelperError(Exception):
    """A failure the helper reports on stderr before exiting 1."""


@dataclass(frozen=True)
class ChainUrl:
    node: str  # host:port, or grpcs://host:port
    project: str  # 0x id or OWNER/NAME, as chainctl's --project takes it


def parse_url(url: str) -> ChainUrl:
    """`chain://HOST[:PORT]/...` and `grpc://...` are plaintext, `grpcs://HOST[:PORT]/...` (from a
    `chain::grpcs://` remote) TLS."""
    parts = urlsplit(url)
    if parts.scheme not in URL_SCHEMES:
        raise HelperError(
            f"{url}: expected chain://HOST[:PORT]/OWNER/PROJECT or chain::grpcs://HOST[:PORT]/OWNER/PROJECT"
        )
    path = unquote(parts.path).strip("/")
    if not path or path.count("/") > 1:
        raise HelperError(f"{url}: the path must be /OWNER/PROJECT or /0xPROJECT_ID")
    try:
        node = node_target(f"grpcs://{parts.netloc}" if parts.scheme == "grpcs" else parts.netloc)
    except AddressError as exc:
        raise HelperError(f"{url}: {exc}") from None
    if os.environ.get(CA_FILE_ENV) and parts.scheme != "grpcs":
        raise HelperError(
            f"{url}: {CA_FILE_ENV} is set but the remote is plaintext: use chain::grpcs://{parts.netloc}/{path}"
        )
    return ChainUrl(node, path)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    err = sys.stderr.buffer
    if len(args) != 2:
        err.write(b"usage: git-remote-chain REMOTE URL (run by git for chain:// remotes)\n")
        return 2
    try:
        url = parse_url(args[1])
    except HelperError as exc:
        err.write(f"fatal: chain: {' '.join(str(exc).split())}\n".encode(errors="replace"))
        return 1
    os.environ.setdefault("GRPC_VERBOSITY", "NONE")  # before grpc loads: its handshake logs are not for git users
    return int(RUN(url, err))


if __name__ == "__main__":
    sys.exit(main())
