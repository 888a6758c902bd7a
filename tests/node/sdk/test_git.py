"""The git reader alone: topological order, merge parents, tags, the chain hash mapping."""

from __future__ import annotations

import subprocess

import pytest

from node import constants as C
from node.crypto.hashing import blake3_256
from node.sdk import git
from tests.node.sdk.gitrepos import git_env, make_history, sh


@pytest.fixture
def history(tmp_path) -> tuple[git.GitRepo, dict[str, str]]:
    ids = make_history(tmp_path / "repo")
    return git.GitRepo(tmp_path / "repo"), ids


def test_rev_list_is_topological_parents_first(history):
    repo, ids = history
    order = repo.rev_list([ids["merge"]])
    assert sorted(order) == sorted(ids.values())
    assert order[0] == ids["root"] and order[-1] == ids["merge"]
    commits = repo.read_commits(order)
    position = {sha: i for i, sha in enumerate(order)}
    for sha in order:
        for parent in commits[sha].parents:
            assert position[parent] < position[sha]


def test_rev_list_excludes_what_is_known(history):
    repo, ids = history
    assert repo.rev_list([ids["merge"]], exclude=[ids["a2"]]) == [ids["b1"], ids["b2"], ids["merge"]]
    assert repo.rev_list([ids["b2"]], exclude=[ids["merge"]]) == []
    assert repo.rev_list([]) == []


def test_merge_commit_parents_in_git_order(history):
    repo, ids = history
    commits = repo.read_commits(list(ids.values()))
    merge = commits[ids["merge"]]
    assert merge.parents == (ids["a2"], ids["b2"])
    hashes = {sha: c.chain_hash for sha, c in commits.items()}
    meta = merge.meta(hashes)
    assert list(meta.parents) == [hashes[ids["a2"]], hashes[ids["b2"]]]
    assert meta.title == "merge feature"
    assert meta.author_name == "Ada Lovelace"
    assert meta.author_timestamp == 1_700_000_500
    assert meta.author_address == b""
    assert git.git_id_of_content_digest(meta.content_digest) == ids["merge"]
    with pytest.raises(git.GitError, match="was not read"):
        merge.meta({})


def test_mapping_is_the_documented_digest(history):
    repo, ids = history
    raw = subprocess.run(
        ["git", "-C", str(repo.path), "cat-file", "commit", ids["merge"]], capture_output=True, check=True
    ).stdout
    c = repo.read_commits([ids["merge"]])[ids["merge"]]
    assert c.raw == raw
    assert c.chain_hash == blake3_256(b"git-commit:" + raw)
    tree = sh(repo.path, "rev-parse", f"{ids['merge']}^{{tree}}")
    assert c.meta({p: b"\x01" * 32 for p in c.parents}).tree_hash == blake3_256(b"git-tree:" + bytes.fromhex(tree))


def test_mapping_is_deterministic_across_clones_and_rebuilds(tmp_path, history):
    repo, ids = history
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", "--no-local", str(repo.path), str(clone)], env=git_env(), check=True)
    other = git.GitRepo(clone)
    mine = {sha: c.chain_hash for sha, c in repo.read_commits(list(ids.values())).items()}
    theirs = {sha: c.chain_hash for sha, c in other.read_commits(list(ids.values())).items()}
    assert mine == theirs
    assert len(set(mine.values())) == len(mine)
    rebuilt = make_history(tmp_path / "again")
    assert rebuilt == ids  # same content and dates: same git ids, so the same chain hashes


def test_refs_peel_annotated_tags_and_skip_non_commits(history):
    repo, ids = history
    tree = sh(repo.path, "rev-parse", "HEAD^{tree}")
    sh(repo.path, "tag", "treetag", tree)
    refs, skipped = repo.refs()
    assert {r.name: r.sha for r in refs} == {
        "refs/heads/main": ids["merge"],
        "refs/heads/feature": ids["b2"],
        "refs/tags/v1": ids["merge"],
        "refs/tags/light": ids["b1"],
    }
    assert skipped == ["refs/tags/treetag"]
    assert repo.full_ref_name("feature") == "refs/heads/feature"
    assert repo.full_ref_name("v1") == "refs/tags/v1"
    with pytest.raises(git.GitError):
        repo.full_ref_name("nope")
    assert repo.resolve("v1") == ids["merge"]
    assert repo.is_ancestor(ids["root"], ids["merge"]) and not repo.is_ancestor(ids["b2"], ids["a2"])
    assert repo.existing_commits([ids["root"], "0" * 40, tree]) == {ids["root"]}


def test_parse_commit_headers_encoding_and_subject():
    raw = (
        b"tree " + b"ab" * 20 + b"\n"
        b"parent " + b"cd" * 20 + b"\n"
        b"author J\xf6rg Z <j@example.org> 1700000000 +0200\n"
        b"committer J <j@example.org> 1700000001 +0200\n"
        b"encoding ISO-8859-1\n"
        b"gpgsig -----BEGIN PGP SIGNATURE-----\n \n abc\n -----END PGP SIGNATURE-----\n"
        b"\n"
        b"First line of the\nsubject paragraph\n\nBody " + b"x" * 10 + b"\n"
    )
    c = git.parse_commit("ef" * 20, raw)
    assert c.tree == "ab" * 20
    assert c.parents == ("cd" * 20,)
    assert c.author_name == "Jörg Z"
    assert c.author_timestamp == 1_700_000_000
    assert c.title == "First line of the subject paragraph"
    long = git.parse_commit("ef" * 20, b"tree " + b"ab" * 20 + b"\nauthor A <a> 1 +0000\n\n" + "é".encode() * 400)
    assert len(long.title) == C.MAX_TITLE_LEN
    empty = git.parse_commit("ef" * 20, b"tree " + b"ab" * 20 + b"\nauthor <> 5 +0000\n")
    assert (empty.title, empty.author_name, empty.author_timestamp) == ("", "", 5)
    with pytest.raises(git.GitError):
        git.parse_commit("ef" * 20, b"author A <a> 1 +0000\n\nno tree")


def test_content_digest_round_trip():
    digest = git.content_digest_of("12" * 20)
    assert len(digest) == 32 and digest[20:] == bytes(12)
    assert git.git_id_of_content_digest(digest) == "12" * 20
    assert git.git_id_of_content_digest(b"\x01" * 32) is None
    assert git.git_id_of_content_digest(git.content_digest_of("34" * 32), 32) == "34" * 32


def test_bundles_keep_order_and_respect_count_and_size(history):
    repo, ids = history
    order = repo.rev_list([ids["merge"]])
    commits = repo.read_commits(order)
    hashes = {sha: c.chain_hash for sha, c in commits.items()}
    metas = [commits[s].meta(hashes) for s in order]
    groups = git.bundles(metas, 2)
    assert [len(g) for g in groups] == [2, 2, 2]
    assert [m for g in groups for m in g] == metas
    one_each = git.bundles(metas, 500, max_bytes=metas[0].ByteSize() + 4)
    assert len(one_each) == len(metas)
    with pytest.raises(ValueError):
        git.bundles(metas, 0)


def test_shallow_clone_and_missing_objects(tmp_path, history):
    repo, _ = history
    shallow = tmp_path / "shallow"
    url = f"file://{repo.path}"
    subprocess.run(["git", "clone", "-q", "--depth", "1", url, str(shallow)], env=git_env(), check=True)
    assert git.GitRepo(shallow).is_shallow()
    assert not repo.is_shallow()
    with pytest.raises(git.GitError, match="missing"):
        repo.read_commits(["0" * 40])
    with pytest.raises(git.GitError):
        git.GitRepo(tmp_path / "nowhere")
