"""Pushing a long git history, and what the commit-pruning walk adds to a block, each beside a bare baseline
of the same run.

    python -m bench.bench_push [--commits 100000] [--walks 10000,50000,100000]

1. `git push`: a generated repository (tests/fixtures/githistory.py: side branches, merges, tags) of
   --commits commits pushed with `git push chain 'refs/heads/*:refs/heads/*'` then `git push --tags`
   through git-remote-chain onto a new project of one node (default flags but --block-interval 0.2), read
   back (every commit and ref equal to git's). Baseline: `git push` of the same repository to a local bare
   repository (git's own transport, objects and refs). Past 10,000 commits the chain prunes back to the
   limit at every bundle, so each later bundle walks the project's protected set.
2. The walk, in process (tests/harness.py on a real LMDB store): a project whose main ref protects W
   commits, at the limit; the time to apply a one-commit bundle on top (the walk over W commits, then the
   scan for unprotected ones), against the same bundle on a project below the limit (no walk).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from node import constants as C
from node.sdk import git
from tests.fixtures.githistory import generate
from tests.fixtures.nodeproc import NodeProcess
from tests.harness import Harness, commit_line, commit_meta
from tests.node.cli.chainview import every_commit, every_ref, new_project
from tests.node.cli.runner import Cli, funded
from tests.node.sdk.gitrepos import git_env

BIN = Path(sys.executable).parent


def git_push(repo: Path, home: Path, *args: str) -> float:
    env = {**git_env(), "CHAINCTL_HOME": str(home), "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    started = time.perf_counter()
    done = subprocess.run(["git", "-C", str(repo), "push", *args], env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"git push {' '.join(args)} failed:\n{done.stderr}")
    return time.perf_counter() - started


def check_equal(cli: Cli, repo: Path, pid: str) -> int:
    """Every commit and ref on chain equal to git's; the number of commits."""
    gitrepo = git.GitRepo(repo)
    local, _ = gitrepo.refs()
    commits = gitrepo.read_commits(gitrepo.rev_list([r.sha for r in local]))
    chain_of = {sha: c.chain_hash for sha, c in commits.items()}
    on_chain = every_commit(cli, pid)
    assert set(on_chain) == set(chain_of.values()), "the chain's commits differ from git's"
    for sha, c in commits.items():
        parents, _, when = on_chain[chain_of[sha]]
        assert parents == tuple(chain_of[p] for p in c.parents) and when == c.author_timestamp, sha
    assert every_ref(cli, pid) == {r.name.encode(): chain_of[r.sha] for r in local}, "refs differ"
    return len(on_chain)


def push_row(commits: int, work: Path) -> None:
    repo = work / "repo"
    started = time.perf_counter()
    shape = generate(repo, commits=commits, seed=5, width=4, merge_every=1_000, branch_every=300)
    made = time.perf_counter() - started
    merges = len(subprocess.run(["git", "-C", str(repo), "rev-list", "--all", "--merges"], capture_output=True,
                                text=True, check=True).stdout.split())  # fmt: skip
    bare = work / "bare.git"
    subprocess.run(["git", "init", "-q", "--bare", str(bare)], check=True)
    local_s = git_push(repo, work, str(bare), "refs/heads/*:refs/heads/*", "refs/tags/*:refs/tags/*")
    node = NodeProcess(work / "data", "--web-addr", "", "--block-interval", "0.2").start()
    try:
        cli = Cli(node, work / "home")
        funded(cli)
        pid = new_project(cli, "history")
        url = f"chain://127.0.0.1:{node.ready['grpc_port']}/{pid}"
        heads_s = git_push(repo, cli.home, url, "refs/heads/*:refs/heads/*")
        tags_s = git_push(repo, cli.home, url, "--tags")
        count = check_equal(cli, repo, pid)
    finally:
        node.stop()
    chain_s = heads_s + tags_s
    print(
        f"\n### `git push` of a generated history ({commits:,} commits, {merges:,} merges, "
        f"{shape['branches']} branches, {shape['tags']} tags; made by git fast-import in {made:.1f} s)\n\n"
        "| push | seconds | commits/s | ÷ git to a local bare repository |\n|---|---:|---:|---:|\n"
        f"| git → local bare repository (baseline) | {local_s:.1f} | {commits / local_s:,.0f} | 1 |\n"
        f"| git → chain (branches {heads_s:.1f} s, tags {tags_s:.1f} s) | {chain_s:.1f} | {commits / chain_s:,.0f} "
        f"| {local_s / chain_s:.3f} |\n\n(read back: {count:,} commits and every ref equal to git's)",
        flush=True,
    )


def walk_rows(walks: list[int], work: Path) -> None:
    print(
        "\n### The pruning walk: one one-commit bundle on a project whose refs protect W commits\n\n"
        "| W protected | block with the bundle, ms | below the limit (no walk), ms | added by the walk, ms "
        "| µs per protected commit |\n|---:|---:|---:|---:|---:|",
        flush=True,
    )
    for w in walks:
        h = Harness(work / f"walk-{w}")
        owner = h.actor()
        pid = bytes(h.commit(owner.b.project_create("big")).applied[0].message.hash)
        small = bytes(h.commit(owner.b.project_create("small")).applied[0].message.hash)
        line = commit_line(0, w)
        per = C.MAX_COMMITS_PER_BUNDLE
        for start in range(0, len(line), per):
            h.commit(owner.b.commit_bundle(pid, line[start : start + per]))
        h.commit(owner.b.ref_update(pid, b"refs/heads/main", line[-1].hash, 1))
        h.commit(owner.b.commit_bundle(small, [commit_meta(10**7)]))
        timed = [_one(h, owner, pid, line[-1].hash, 2 * 10**7 + i) for i in range(7)]
        below = [_one(h, owner, small, commit_meta(10**7).hash, 3 * 10**7 + i) for i in range(7)]
        with_walk, without = sorted(timed)[3], sorted(below)[3]
        added = with_walk - without
        print(
            f"| {w:,} | {with_walk * 1e3:.1f} | {without * 1e3:.1f} | {added * 1e3:.1f} | {added / w * 1e6:.2f} |",
            flush=True,
        )


def _one(h: Harness, owner: object, pid: bytes, parent: bytes, seed: int) -> float:
    """Apply a one-commit bundle (a sibling of `parent`'s other children: the ref stays where it is)."""
    builder = owner.b  # type: ignore[attr-defined]
    msg = builder.commit_bundle(pid, [commit_meta(seed, parent)])
    started = time.perf_counter()
    h.commit(msg)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--commits", type=int, default=100_000)
    parser.add_argument("--walks", default="10000,50000,100000", help="protected-set sizes for the walk rows")
    ns = parser.parse_args()
    with tempfile.TemporaryDirectory() as d:
        push_row(ns.commits, Path(d) / "push")
        walk_rows([int(w) for w in ns.walks.split(",") if w], Path(d))


if __name__ == "__main__":
    main()
