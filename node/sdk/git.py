"""Read a local git repository with the ``git`` CLI and map its commits onto the chain.

Commit hashes on chain are client-declared 32-byte digests, git object ids are 20-byte SHA-1 (or
32-byte SHA-256) digests. chainctl maps a git commit to a chain ``CommitMeta`` deterministically, from
the commit object alone, so every clone of a repository computes the same chain hashes:

- ``hash`` = BLAKE3-256(``b"git-commit:"`` ‖ the raw commit object, exactly the bytes
  ``git cat-file commit <id>`` prints: headers, blank line, message; no ``commit <size>\\0`` header).
  The raw object names the tree and the parents by their git ids, so two commits map to the same
  chain hash exactly when they are the same git commit.
- ``parents`` = the chain hashes of the git parents, in git order.
- ``tree_hash`` = BLAKE3-256(``b"git-tree:"`` ‖ the raw git tree id (20 or 32 bytes)).
- ``content_digest`` = the git commit id, left-aligned and zero-padded to 32 bytes (a SHA-256
  repository's id is already 32 bytes): anyone reading the chain can find the commit in a clone.
- ``title`` = exactly what ``git log --format=%s`` prints (see ``split_message``), decoded with the
  commit's ``encoding`` header as git re-encodes to UTF-8 (UTF-8 by default; bytes that are not valid
  in it are replaced by U+FFFD, where git would print them raw), cut to 256 characters.
- ``author_name`` = the author's name (without e-mail), cut to 256 characters; ``author_timestamp`` =
  the author date in unix seconds; ``author_address`` is left empty (the chain records the pushing
  account).

Nothing here talks to a node; ``node.sdk.push`` does.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from chain.v1 import message_pb2 as pb
from node import constants as C
from node.crypto.hashing import blake3_256

COMMIT_DOMAIN = b"git-commit:"
TREE_DOMAIN = b"git-tree:"
DEFAULT_REF_PREFIXES = ("refs/heads/", "refs/tags/")


class GitError(Exception):
    """A git command failed or the repository holds something chainctl cannot map."""


def chain_commit_hash(raw: bytes) -> bytes:
    """The 32-byte chain hash of a git commit object (its raw ``git cat-file commit`` bytes)."""
    return blake3_256(COMMIT_DOMAIN + raw)


def chain_tree_hash(tree_id: bytes) -> bytes:
    """The 32-byte chain ``tree_hash`` of a raw git tree id."""
    return blake3_256(TREE_DOMAIN + tree_id)


def content_digest_of(git_id: str) -> bytes:
    """The git commit id zero-padded to 32 bytes (``content_digest``)."""
    raw = bytes.fromhex(git_id)
    if len(raw) > C.HASH_LEN:
        raise GitError(f"git object id {git_id} is longer than {C.HASH_LEN} bytes")
    return raw.ljust(C.HASH_LEN, b"\x00")


def git_id_of_content_digest(digest: bytes, id_len: int = 20) -> str | None:
    """The git id a ``content_digest`` carries, if it has the shape chainctl writes."""
    if len(digest) != C.HASH_LEN or any(digest[id_len:]):
        return None
    return digest[:id_len].hex()


def decode_message(raw: bytes, encoding: str) -> str:
    """Commit bytes as text: the `encoding` header's codec (UTF-8 when unknown), bad bytes replaced."""
    try:
        return raw.decode(encoding, errors="replace")
    except LookupError:  # an encoding header Python does not know
        return raw.decode("utf-8", errors="replace")


# git's isspace(): space, tab, LF, CR (not VT or FF; git-compat-util.h's sane ctype).
GIT_SPACE = " \t\n\r"


def _blank(line: str) -> bool:
    return not line.rstrip(GIT_SPACE)


def split_message(message: str) -> tuple[str, str]:
    """(subject, body) of a decoded commit message, as ``git log --format=%s`` and ``%b`` print them.

    git reads the message up to its first NUL; skips leading lines that are blank (only spaces, tabs,
    CR); the subject is the following run of non-blank lines, each with its trailing whitespace (CR
    included) removed, joined by single spaces; leading and inner whitespace of a line are kept. The
    body starts after the blank lines that follow the subject. So a CRLF message splits where an LF
    one does, and ``"  a  b\t"`` has the subject ``"  a  b"``."""
    # str.splitlines also splits on VT, FF, U+2028...; git splits on LF only.
    lines = message.split("\0", 1)[0].split("\n")
    i = 0
    while i < len(lines) and _blank(lines[i]):
        i += 1
    subject: list[str] = []
    while i < len(lines) and not _blank(lines[i]):
        subject.append(lines[i].rstrip(GIT_SPACE))
        i += 1
    while i < len(lines) and _blank(lines[i]):
        i += 1
    return " ".join(subject), "\n".join(lines[i:])


def _cut(text: str, limit: int = C.MAX_TITLE_LEN) -> str:
    return text if len(text) <= limit else text[:limit]


@dataclass(frozen=True)
class GitCommit:
    """One git commit as chainctl maps it."""

    sha: str
    raw: bytes
    tree: str
    parents: tuple[str, ...]
    author_name: str
    author_timestamp: int
    title: str

    @property
    def chain_hash(self) -> bytes:
        return chain_commit_hash(self.raw)

    def meta(self, chain_hashes: dict[str, bytes] | None = None) -> pb.CommitMeta:
        """The CommitMeta; parent chain hashes come from ``chain_hashes`` (git id -> hash) when given.

        A parent's chain hash depends only on the parent's raw object, so a parent missing from
        ``chain_hashes`` is an error rather than something guessed.
        """
        known = chain_hashes or {}
        parents: list[bytes] = []
        for parent in self.parents:
            if parent not in known:
                raise GitError(f"commit {self.sha}: parent {parent} was not read")
            parents.append(known[parent])
        return pb.CommitMeta(
            hash=self.chain_hash,
            parents=parents,
            tree_hash=chain_tree_hash(bytes.fromhex(self.tree)),
            title=self.title,
            author_name=self.author_name,
            author_timestamp=self.author_timestamp,
            content_digest=content_digest_of(self.sha),
        )


def parse_commit(sha: str, raw: bytes) -> GitCommit:
    """Parse the raw bytes of a commit object (``git cat-file commit``)."""
    head, sep, message = raw.partition(b"\n\n")
    if not sep:
        message = b""
    tree = ""
    parents: list[str] = []
    author = b""
    encoding = "utf-8"
    for line in head.split(b"\n"):
        if line.startswith(b" "):
            continue  # continuation of a multi-line header (gpgsig, mergetag)
        key, _, value = line.partition(b" ")
        if key == b"tree":
            tree = value.decode("ascii")
        elif key == b"parent":
            parents.append(value.decode("ascii"))
        elif key == b"author" and not author:
            author = value
        elif key == b"encoding":
            encoding = value.decode("ascii", errors="replace").strip() or "utf-8"
    if not tree:
        raise GitError(f"commit {sha} has no tree header")
    name, author_timestamp = _parse_ident(author)
    subject, _ = split_message(decode_message(message, encoding))
    return GitCommit(
        sha=sha,
        raw=raw,
        tree=tree,
        parents=tuple(parents),
        author_name=_cut(decode_message(name, encoding).strip()),
        author_timestamp=author_timestamp,
        title=_cut(subject),
    )


def _parse_ident(ident: bytes) -> tuple[bytes, int]:
    """``Name <email> 1700000000 +0100`` -> (name, timestamp); tolerant of odd idents."""
    lt = ident.find(b"<")
    gt = ident.rfind(b">")
    name = ident[:lt] if lt >= 0 else ident
    tail = ident[gt + 1 :].split() if gt >= 0 else []
    try:
        timestamp = max(int(tail[0]), 0) if tail else 0
    except ValueError:
        timestamp = 0
    return name, timestamp


@dataclass(frozen=True)
class LocalRef:
    name: str
    sha: str  # the commit the ref points at (annotated tags peeled)


class GitRepo:
    """A local repository read through the ``git`` CLI (never modified)."""

    def __init__(self, path: str | Path, git: str = "git") -> None:
        self.path = Path(path)
        self.git = git
        if not self.path.exists():
            raise GitError(f"{self.path}: no such directory")
        self.run("rev-parse", "--git-dir")

    def run(self, *args: str, input_bytes: bytes | None = None, check: bool = True) -> bytes:
        cmd = [self.git, "-C", str(self.path), *args]
        try:
            done = subprocess.run(cmd, input=input_bytes, capture_output=True, check=False)
        except FileNotFoundError as exc:
            raise GitError(f"cannot run {self.git}: {exc}") from None
        if check and done.returncode != 0:
            detail = done.stderr.decode("utf-8", errors="replace").strip().splitlines()
            raise GitError(f"git {' '.join(args[:2])} failed: {detail[-1] if detail else done.returncode}")
        return done.stdout

    def is_shallow(self) -> bool:
        return self.run("rev-parse", "--is-shallow-repository").strip() == b"true"

    def id_len(self) -> int:
        """Bytes in an object id: 20 (SHA-1) or 32 (SHA-256)."""
        out = self.run("rev-parse", "--show-object-format", check=False).strip()
        return 32 if out == b"sha256" else 20

    def refs(self, prefixes: Sequence[str] = DEFAULT_REF_PREFIXES) -> tuple[list[LocalRef], list[str]]:
        """Branches and tags under ``prefixes`` with the commit each points at (tags peeled).

        Returns (refs, skipped) where ``skipped`` names refs that do not lead to a commit (a tag of a
        tree or blob)."""
        out = self.run("for-each-ref", "--format=%(refname)", *[p.rstrip("/") for p in prefixes])
        names = [n for n in out.decode("utf-8", errors="surrogateescape").splitlines() if n]
        return self.resolve_refs(names)

    def resolve_refs(self, names: Sequence[str]) -> tuple[list[LocalRef], list[str]]:
        """Peel each ref to a commit in one ``cat-file --batch-check`` call."""
        if not names:
            return [], []
        query = "".join(f"{n}^{{commit}}\n" for n in names).encode("utf-8", errors="surrogateescape")
        lines = self.run("cat-file", "--batch-check=%(objectname) %(objecttype)", input_bytes=query).splitlines()
        found: list[LocalRef] = []
        skipped: list[str] = []
        for name, line in zip(names, lines, strict=True):
            parts = line.decode("ascii", errors="replace").split()
            if len(parts) == 2 and parts[1] == "commit":
                found.append(LocalRef(name, parts[0]))
            else:
                skipped.append(name)
        return found, skipped

    def full_ref_name(self, name: str) -> str:
        """``main`` -> ``refs/heads/main`` (or ``refs/tags/main``); full names are kept."""
        if name.startswith("refs/"):
            return name
        for prefix in DEFAULT_REF_PREFIXES:
            if self.ref_exists(prefix + name):
                return prefix + name
        raise GitError(f"no branch or tag named {name!r}")

    def ref_exists(self, ref: str) -> bool:
        cmd = [self.git, "-C", str(self.path), "show-ref", "--verify", "--quiet", ref]
        return subprocess.run(cmd, capture_output=True, check=False).returncode == 0

    def resolve(self, rev: str) -> str:
        """The commit id a revision names."""
        out = self.run("rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}", check=False)
        sha = out.decode("ascii", errors="replace").strip()
        if not sha:
            raise GitError(f"{rev!r} does not name a commit")
        return sha

    def existing_commits(self, shas: Sequence[str]) -> set[str]:
        """Which of ``shas`` are commits present in the object store."""
        if not shas:
            return set()
        query = "".join(f"{s}\n" for s in shas).encode()
        lines = self.run("cat-file", "--batch-check=%(objecttype)", input_bytes=query).splitlines()
        return {s for s, line in zip(shas, lines, strict=True) if line.strip() == b"commit"}

    def rev_list(self, tips: Iterable[str], exclude: Iterable[str] = ()) -> list[str]:
        """Commits reachable from ``tips`` but not from ``exclude``, parents before children."""
        revs = list(dict.fromkeys(tips))
        if not revs:
            return []
        stdin = "\n".join([*revs, *(f"^{x}" for x in dict.fromkeys(exclude))]) + "\n"
        out = self.run("rev-list", "--topo-order", "--reverse", "--stdin", input_bytes=stdin.encode())
        return out.decode("ascii").split()

    def read_commits(self, shas: Sequence[str]) -> dict[str, GitCommit]:
        """Raw commit objects in one ``cat-file --batch`` call."""
        if not shas:
            return {}
        out = self.run("cat-file", "--batch", input_bytes="".join(f"{s}\n" for s in shas).encode())
        commits: dict[str, GitCommit] = {}
        pos = 0
        for requested in shas:
            eol = out.index(b"\n", pos)
            header = out[pos:eol].decode("ascii", errors="replace").split()
            pos = eol + 1
            if len(header) != 3:
                raise GitError(f"object {requested} is missing (a shallow or partial clone?)")
            sha, kind, size = header[0], header[1], int(header[2])
            body = out[pos : pos + size]
            pos += size + 1  # the object is followed by a newline
            if kind != "commit":
                raise GitError(f"object {requested} is a {kind}, not a commit")
            commits[sha] = parse_commit(sha, body)
        return commits

    def is_ancestor(self, ancestor: str, descendant: str) -> bool:
        cmd = [self.git, "-C", str(self.path), "merge-base", "--is-ancestor", ancestor, descendant]
        done = subprocess.run(cmd, capture_output=True, check=False)
        if done.returncode > 1:
            raise GitError(f"git merge-base failed: {done.stderr.decode('utf-8', errors='replace').strip()}")
        return done.returncode == 0


def bundles(
    metas: Sequence[pb.CommitMeta], max_commits: int, max_bytes: int = C.MAX_MESSAGE_BYTES - 16 * 1024
) -> list[list[pb.CommitMeta]]:
    """Split topologically ordered commits into consecutive bundles (order kept, so parents come first).

    Each bundle has at most ``max_commits`` commits and its commits take at most ``max_bytes`` encoded,
    leaving room for the envelope under the node's message size limit."""
    if not 1 <= max_commits <= C.MAX_COMMITS_PER_BUNDLE:
        raise ValueError(f"bundle size must be 1-{C.MAX_COMMITS_PER_BUNDLE}, got {max_commits}")
    out: list[list[pb.CommitMeta]] = []
    current: list[pb.CommitMeta] = []
    size = 0
    for meta in metas:
        item = meta.ByteSize() + 4  # field tag and length prefix
        if current and (len(current) >= max_commits or size + item > max_bytes):
            out.append(current)
            current, size = [], 0
        current.append(meta)
        size += item
    if current:
        out.append(current)
    return out
