"""Commit titles equal `git log --format=%s` (and bodies `%b`) for messages git itself treats oddly.

Each message is written as a raw commit object (``git hash-object -t commit``), so CRLF, leading and
inner whitespace, NUL bytes and non-UTF-8 encodings reach the object unchanged; the expected subject is
what the real ``git`` binary prints, never a hard-coded string."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from node.sdk import git
from tests.node.sdk.gitrepos import git_env, sh

MESSAGES: list[tuple[bytes, bytes | None]] = [
    (b"plain title\n\nbody\n", None),
    (b"crlf title\r\nsecond line\r\n\r\nbody line\r\n", None),
    (b"crlf only\r\n\r\n\r\nbody\r\n", None),
    (b"   leading spaces\n", None),
    (b"\tleading tab and  inner   runs\t of\twhitespace\n\nbody", None),
    (b"\n\n  \n\t\nafter blank lines\ncontinued   \nthird\t \n\n\nbody\n", None),
    (b"trailing whitespace   \t \n", None),
    (b"no newline at end", None),
    (b"vertical\x0btab and form\x0cfeed\x0c\n\nbody", None),
    (b"with a \r inner carriage return\n", None),
    (b"nul \x00 truncates\nmore\n", None),
    (b"", None),
    (b"\n\n\n", None),
    (b"   \n \t \r\n", None),
    (b"caf\xe9 latin-1 title\n\nbody \xe9\n", b"ISO-8859-1"),
    (b"\x93\xfa\x96{\x8c\xea shift-jis\n", b"Shift_JIS"),
    (b"invalid utf-8 \xff\xfe title\n", None),
    (b"unknown encoding \xe9\n", b"x-no-such-encoding"),
    ("utf-8 ünïcödé   title\r\n".encode(), b"UTF-8"),
]


def write_commit(repo: Path, tree: str, message: bytes, encoding: bytes | None) -> str:
    raw = b"tree " + tree.encode() + b"\nauthor A U Thor <a@example.org> 1700000000 +0000\n"
    raw += b"committer A U Thor <a@example.org> 1700000000 +0000\n"
    if encoding is not None:
        raw += b"encoding " + encoding + b"\n"
    raw += b"\n" + message
    done = subprocess.run(
        ["git", "-C", str(repo), "hash-object", "-t", "commit", "-w", "--literally", "--stdin"],
        input=raw,
        capture_output=True,
        env=git_env(),
        check=True,
    )
    return done.stdout.decode().strip()


def git_format(repo: Path, sha: str, fmt: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), "-c", "i18n.logOutputEncoding=UTF-8", "log", "-1", f"--format={fmt}", sha],
        capture_output=True,
        env=git_env(),
        check=True,
    )
    out = done.stdout.decode("utf-8", errors="replace")
    return out.removesuffix("\n")  # the newline `log` adds after each entry


@pytest.fixture(scope="module")
def commits(tmp_path_factory) -> tuple[Path, list[str]]:
    repo = tmp_path_factory.mktemp("subjects") / "repo"
    repo.mkdir()
    sh(repo, "init", "-q", "-b", "main")
    tree = sh(repo, "hash-object", "-t", "tree", "-w", os.devnull)  # the empty tree
    return repo, [write_commit(repo, tree, m, e) for m, e in MESSAGES]


@pytest.mark.parametrize("index", range(len(MESSAGES)))
def test_title_is_git_log_subject(commits, index):
    repo, shas = commits
    sha = shas[index]
    parsed = git.GitRepo(repo).read_commits([sha])[sha]
    assert parsed.title == git_format(repo, sha, "%s")


@pytest.mark.parametrize("index", range(len(MESSAGES)))
def test_split_message_body_is_git_log_body(commits, index):
    repo, shas = commits
    sha = shas[index]
    raw = git.GitRepo(repo).run("cat-file", "commit", sha)
    message = raw.partition(b"\n\n")[2]
    encoding = MESSAGES[index][1]
    text = git.decode_message(message, encoding.decode() if encoding else "utf-8")
    subject, body = git.split_message(text)
    assert subject == git_format(repo, sha, "%s")
    assert body.rstrip("\n") == git_format(repo, sha, "%b").rstrip("\n")


def test_old_behaviours_are_gone():
    """The three ways titles used to differ from git (psf/requests): CRLF, leading, inner whitespace."""
    assert git.split_message("a\r\nb\r\n\r\nbody\r\n")[0] == "a b"
    assert git.split_message("  lead")[0] == "  lead"
    assert git.split_message("in   ner")[0] == "in   ner"
