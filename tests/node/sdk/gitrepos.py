"""Throw-away git repositories with fixed identities and dates (so chain hashes are reproducible)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path


def git_env(when: int = 1_700_000_000) -> dict[str, str]:
    return {
        **os.environ,
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "Ada Lovelace",
        "GIT_AUTHOR_EMAIL": "ada@example.org",
        "GIT_COMMITTER_NAME": "Ada Lovelace",
        "GIT_COMMITTER_EMAIL": "ada@example.org",
        "GIT_AUTHOR_DATE": f"{when} +0000",
        "GIT_COMMITTER_DATE": f"{when} +0000",
    }


def sh(repo: Path, *args: str, when: int = 1_700_000_000) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), *args], env=git_env(when), capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def commit(repo: Path, message: str, when: int, filename: str | None = None) -> str:
    path = repo / (filename or "file.txt")
    path.write_text(f"{message}\n")
    sh(repo, "add", "-A")
    sh(repo, "commit", "-q", "-m", message, when=when)
    return sh(repo, "rev-parse", "HEAD")


def make_history(repo: Path) -> dict[str, str]:
    # root - a1 - a2 ------- merge   (main, tag v1)
    #     \- b1 - b2 ------/          (feature; tag light on b1)
    repo.mkdir(parents=True)
    sh(repo, "init", "-q", "-b", "main")
    ids = {"root": commit(repo, "root", 1_700_000_000)}
    sh(repo, "checkout", "-q", "-b", "feature")
    ids["b1"] = commit(repo, "b1", 1_700_000_100, "b.txt")
    ids["b2"] = commit(repo, "b2", 1_700_000_200, "b.txt")
    sh(repo, "checkout", "-q", "main")
    ids["a1"] = commit(repo, "a1", 1_700_000_300)
    ids["a2"] = commit(repo, "a2", 1_700_000_400)
    sh(repo, "merge", "-q", "--no-ff", "feature", "-m", "merge feature", when=1_700_000_500)
    ids["merge"] = sh(repo, "rev-parse", "HEAD")
    sh(repo, "tag", "-a", "v1", "-m", "release", when=1_700_000_600)
    sh(repo, "tag", "light", ids["b1"])
    return ids
