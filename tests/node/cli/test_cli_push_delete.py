"""chainctl push: ref deletion (--prune, `:ref`), refspecs, the current directory, non-UTF-8 ref names."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

import pytest

from tests.fixtures.nodeproc import NodeProcess
from tests.node.cli.chainview import chain_hashes, new_project, refs_on_chain
from tests.node.cli.runner import Cli
from tests.node.sdk.gitrepos import make_history, sh


@pytest.fixture(scope="module")
def cli(tmp_path_factory) -> Iterator[Cli]:
    base = tmp_path_factory.mktemp("push-delete")
    node = NodeProcess(base / "data", "--web-addr", "").start()
    try:
        c = Cli(node, base / "home")
        c("keys", "create", "wallet", "--type", "secp256k1")
        c("account", "init", "--wallet", "wallet")
        c("account", "fund", "wallet", "--units", "1", "--authority", node.ready["devnet_authority"])
        yield c
    finally:
        node.stop()


def test_prune_and_colon_refspec_delete_chain_refs(cli, tmp_path, monkeypatch):
    repo = tmp_path / "repo"
    ids = make_history(repo)
    pid = new_project(cli, "deletes")
    monkeypatch.chdir(repo)
    cli("push", "--project", pid)  # the current repository
    assert set(refs_on_chain(cli, pid)) == {
        b"refs/heads/main",
        b"refs/heads/feature",
        b"refs/tags/v1",
        b"refs/tags/light",
    }

    # `:light` deletes the tag (REF_DELETE); nothing else moves.
    out = cli.json("push", "--project", pid, "--ref", ":light")
    assert out["deleted"] == [{"ref": "refs/tags/light", "old_hash": out["deleted"][0]["old_hash"], "nonce": 2}]
    assert out["refs"] == [] and out["commits_sent"] == 0
    assert b"refs/tags/light" not in refs_on_chain(cli, pid)
    again = cli("push", "--project", pid, "--ref", ":light", ok=False)
    assert again.err.startswith("error: REF_NOT_FOUND: refs/heads/light")

    # A branch deleted locally stays on chain until --prune.
    sh(repo, "tag", "-d", "light")
    sh(repo, "branch", "-q", "-D", "feature")
    plain = cli.json("push", "--project", pid)
    assert plain["deleted"] == []
    assert b"refs/heads/feature" in refs_on_chain(cli, pid)
    pruned = cli.json("push", "--project", pid, "--prune")
    assert [d["ref"] for d in pruned["deleted"]] == ["refs/heads/feature"]
    assert set(refs_on_chain(cli, pid)) == {b"refs/heads/main", b"refs/tags/v1"}

    # SRC:DST pushes a revision under another name; the recreated tag starts again at nonce 1.
    cli("push", "--project", pid, "--ref", f"{ids['a1']}:refs/tags/light", "--ref", "main:release")
    refs = refs_on_chain(cli, pid)
    hashes = chain_hashes(repo)
    assert refs[b"refs/tags/light"] == (hashes[ids["a1"]], 1)
    assert refs[b"refs/heads/release"] == (hashes[ids["merge"]], 1)


def test_non_utf8_ref_names_print_as_hex(cli, tmp_path):
    repo = tmp_path / "repo"
    make_history(repo)
    bad = b"refs/heads/caf\xe9"
    sh(repo, "update-ref", os.fsdecode(bad), "main")
    pid = new_project(cli, "latin1")
    out = cli("--json", "push", str(repo), "--project", pid)
    doc = json.loads(out.out)
    assert "0x" + bad.hex() in [r["ref"] for r in doc["refs"]]
    assert bad in refs_on_chain(cli, pid)
    text = cli("push", str(repo), "--project", pid, "--dry-run")
    assert "0x" + bad.hex() in text.out
    sh(repo, "update-ref", "-d", os.fsdecode(bad))
    pruned = cli.json("push", str(repo), "--project", pid, "--prune")
    assert [d["ref"] for d in pruned["deleted"]] == ["0x" + bad.hex()]
