"""``chainctl git-hash``: the chain hashes of git revisions, computed offline from the local repository
(no node, no grpc)."""

from __future__ import annotations

from typing import Any

from node.cli.common import CliError, Context, hex0x
from node.errors import CliCode
from node.sdk import git


def open_repo(path: str) -> git.GitRepo:
    try:
        return git.GitRepo(path)
    except git.GitError as exc:
        raise CliError(CliCode.GIT_ERROR, str(exc)) from None


def git_hash(ctx: Context, args: Any) -> None:
    repo = open_repo(args.repo_path)
    try:
        shas = [repo.resolve(r) for r in args.revs]
        commits = repo.read_commits(list(dict.fromkeys(shas)))
    except git.GitError as exc:
        raise CliError(CliCode.GIT_ERROR, str(exc)) from None
    docs = []
    for rev, sha in zip(args.revs, shas, strict=True):
        c = commits[sha]
        meta = c.meta({p: h.chain_hash for p, h in repo.read_commits(list(c.parents)).items()})
        docs.append(
            {
                "rev": rev,
                "git": sha,
                "hash": hex0x(bytes(meta.hash)),
                "parents": [hex0x(bytes(x)) for x in meta.parents],
                "tree_hash": hex0x(bytes(meta.tree_hash)),
                "title": meta.title,
            }
        )
    ctx.emit({"commits": docs}, [f"{d['git']}  {d['hash']}  {d['title']}" for d in docs])
