"""chainctl against a real node: keys, accounts and custody keys, funding, projects, social, merge
requests, generic queries, errors, and one run as a real subprocess."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from chain.v1 import rpc_pb2
from node.sdk.keys import Secp256k1Key
from node.storage import schema
from tests.fixtures.nodeproc import ROOT, NodeProcess
from tests.node.cli.runner import Cli, authority, funded
from tests.node.sdk.gitrepos import make_history


@pytest.fixture(scope="module")
def node(tmp_path_factory) -> Iterator[NodeProcess]:
    proc = NodeProcess(tmp_path_factory.mktemp("cli") / "data", "--web-addr", "").start()
    yield proc
    proc.stop()


@pytest.fixture
def cli(node, tmp_path) -> Cli:
    return Cli(node, tmp_path / "home")


def test_keys_of_every_type(cli):
    for name, kind in (("d", "ed25519"), ("w", "secp256k1"), ("h", "p256")):
        doc = cli.json("keys", "create", name, "--type", kind)
        assert doc["type"] == kind
    passkey = cli.json(
        "keys", "create", "pk", "--type", "webauthn", "--rp-id", "localhost", "--origin", "http://localhost:8080"
    )
    assert (passkey["rp_id"], passkey["origin"]) == ("localhost", "http://localhost:8080")
    listed = cli.json("keys", "list")["keys"]
    assert [(k["name"], k["type"]) for k in listed] == [
        ("d", "ed25519"),
        ("h", "p256"),
        ("pk", "webauthn"),
        ("w", "secp256k1"),
    ]
    shown = cli.json("keys", "show", "d")
    assert shown["address"] is None and len(shown["public_key"]) == 2 + 64
    w = cli.json("keys", "show", "w")
    assert len(w["address"]) == 2 + 40 and len(w["public_key"]) == 2 + 128
    text = cli("keys", "show", "w").out
    assert f"address: {w['address']}" in text
    for path in (cli.home / "keys").iterdir():
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE((cli.home / "keys").stat().st_mode) == 0o700
    dup = cli("keys", "create", "d", ok=False)
    assert dup.rc == 1
    assert dup.err == f"error: KEY_EXISTS: a key named 'd' already exists ({cli.home}/keys/d.json)\n"

    wallet = Secp256k1Key.generate()
    imported = cli.json("keys", "import", "eth", "--type", "secp256k1", "--private-key", wallet.private_bytes().hex())
    assert imported["address"] == "0x" + wallet.address.hex()
    bad = cli("keys", "import", "bad", "--type", "p256", "--private-key", "00" * 32, ok=False)
    assert bad.err.startswith("error: INVALID_KEY:")
    cli("keys", "delete", "eth")
    assert cli("keys", "show", "eth", ok=False).err.startswith("error: KEY_NOT_FOUND:")
    assert cli("keys", "create", "../x", ok=False).err.startswith("error: INVALID_NAME:")


def test_account_with_wallet_then_passkey_custody_then_p256(cli, node):
    owner = funded(cli, units=2)
    stub = node.client().stub
    addr = bytes.fromhex(owner[2:])
    account = stub.GetAccount(rpc_pb2.GetAccountRequest(owner_address=addr))
    assert account.storage_units == 2
    assert len(account.keys) == 1 and account.account.custody_nonce == 1

    # A passkey joins the keychain, then registers a second delegated key on its own.
    cli("keys", "create", "passkey", "--type", "webauthn")
    auth = cli.json("account", "authorize-custody", "--wallet", "wallet", "--key", "passkey")
    assert auth["owner_address"] == owner and auth["signature_type"] == "webauthn"
    second = cli.json("account", "init", "--wallet", "passkey", "--key", "second")
    assert second["owner_address"] == owner and second["custody_nonce"] == 2
    keys = stub.ListKeys(rpc_pb2.ListKeysRequest(owner_address=addr)).keys
    assert len(keys) == 2
    by_key = {"0x" + bytes(k.key).hex(): k for k in keys}
    assert "0x" + bytes(by_key[second["public_key"]].authorized_by).hex() == auth["key_id"]
    custody = stub.GetAccount(rpc_pb2.GetAccountRequest(owner_address=addr)).custody_keys
    assert ["0x" + bytes(k.key_id).hex() for k in custody] == [auth["key_id"]]

    # The second key now signs for the account (it is the default signer).
    assert cli.json("account", "list")["accounts"] == [
        {"owner_address": owner, "signer": "second", "wallet": "passkey", "default": True}
    ]
    cli("account", "set", "display_name", "Ada")
    assert cli.json("--account", "wallet", "account", "show")["account"]["owner_address"] == owner
    assert cli.json("account", "use", owner)["default"] == owner
    unknown = cli("--account", "nobody", "account", "show", ok=False)
    assert unknown.err.startswith("error: ACCOUNT_NOT_INITIALIZED:")
    shown = cli.json("account", "show")
    assert shown["account"]["display_name"] == "Ada"
    assert shown["storage_units"] == 2

    # A P-256 key with an expiry adds an agent key restricted to one project, then loses its rights.
    pid = cli.json("project", "create", "agents")["project_id"]
    cli("keys", "create", "hsm", "--type", "p256")
    cli("account", "authorize-custody", "--wallet", "wallet", "--key", "hsm", "--expires-at", "+3600")
    agent = cli.json("account", "add-key", "--wallet", "hsm", "--key", "agent", "--scope", "agent", "--project", pid)
    assert agent["allowed_projects"] == [pid]
    entry = stub.GetKey(rpc_pb2.GetKeyRequest(owner_address=addr, key=bytes.fromhex(agent["public_key"][2:]))).key
    assert [bytes(p) for p in entry.allowed_projects] == [bytes.fromhex(pid[2:])]
    cli("account", "remove-key", "--wallet", "hsm", "--key", "agent")
    assert len(stub.ListKeys(rpc_pb2.ListKeysRequest(owner_address=addr)).keys) == 2
    cli("account", "revoke-custody", "--wallet", "wallet", "--key", "hsm")
    revoked = cli("account", "add-key", "--wallet", "hsm", "--key", "agent2", ok=False)
    assert revoked.err.startswith("error: CUSTODY_KEY_REVOKED:")


def test_projects_social_and_merge_requests(cli, node, tmp_path):
    owner = funded(cli)
    pid = cli.json("project", "create", "web", "--description", "the site")["project_id"]
    private = cli.json("project", "create", "secret", "--private")["project_id"]
    listed = cli.json("project", "list", "--owner", owner)["projects"]
    assert {p["project_id"]: p["visibility"] for p in listed} == {
        pid: "PROJECT_VISIBILITY_PUBLIC",
        private: "PROJECT_VISIBILITY_PRIVATE",
    }
    by_name = cli.json("project", "show", f"{owner}/web")
    assert (by_name["project_id"], by_name["description"]) == (pid, "the site")
    assert cli.json("project", "show", "web")["project_id"] == pid
    assert "web" in cli("project", "list", "--all").out

    repo = tmp_path / "repo"
    ids = make_history(repo)
    cli("push", str(repo), "--project", "web")
    refs = cli.json("project", "refs", "web")["refs"]
    assert [(r["ref"], r["nonce"]) for r in refs] == [
        ("refs/heads/feature", 1),
        ("refs/heads/main", 1),
        ("refs/tags/light", 1),
        ("refs/tags/v1", 1),
    ]
    assert "refs/heads/main  (nonce 1)" in cli("project", "refs", pid).out
    cli("star", "web")
    assert cli.json("project", "show", pid)["star_count"] == 1
    liked = cli.json("like", pid, "main", "--repo", str(repo))
    head = cli.json("git-hash", str(repo), ids["merge"])["commits"][0]["hash"]
    assert liked["commit"] == head
    reactions = node.client().stub.ListReactionsByTarget(
        rpc_pb2.ListReactionsByTargetRequest(project_id=bytes.fromhex(pid[2:]), commit_hash=bytes.fromhex(head[2:]))
    )
    assert len(reactions.reactions) == 1
    cli("unlike", pid, head)
    cli("unstar", pid)
    assert cli.json("project", "show", pid)["star_count"] == 0

    # A second account forks, follows, and opens merge requests.
    bob = Cli(node, tmp_path / "bob")
    bob_addr = funded(bob, "bobwallet")
    cli("follow", bob_addr)
    fork = bob.json("project", "fork", pid, "web-fork")["project_id"]
    assert bob.json("project", "show", fork)["forked_from"] == pid
    mr = bob.json("mr", "open", pid, fork, "--source-ref", "feature", "--target-ref", "main", "--title", "Add feature")
    listed_mrs = cli.json("mr", "list", pid)["merge_requests"]
    assert [(m["request_id"], m["title"], m["source_ref"]) for m in listed_mrs] == [
        (mr["request_id"], "Add feature", "0x" + b"refs/heads/feature".hex())
    ]
    assert cli.json("mr", "show", pid, mr["request_id"])["status"] == "MERGE_REQUEST_STATUS_OPEN"
    assert cli.json("mr", "close", pid, mr["request_id"], "--merged")["state"] == "merged"
    assert cli.json("mr", "list", pid)["merge_requests"] == []

    cli("project", "collaborator", "add", pid, bob_addr, "--permission", "write")
    assert cli.json("project", "collaborator", "list", pid)["collaborators"][0]["permission"] == "PERMISSION_WRITE"
    cli("project", "collaborator", "remove", pid, bob_addr)
    cli("project", "set", pid, "website", "https://example.org")
    cli("project", "archive", private)
    assert cli.json("project", "show", private)["status"] == "PROJECT_STATUS_ARCHIVED"
    archived = cli("project", "set", private, "description", "read-only now", ok=False)
    assert archived.rc == 1 and archived.err.startswith("error: PROJECT_ARCHIVED:")
    links = node.client().stub.ListLinks(rpc_pb2.ListLinksRequest(owner_address=bytes.fromhex(owner[2:])))
    assert [("0x" + bytes(x.target_owner_address).hex()) for x in links.links] == [bob_addr]


def test_query_every_kind_of_argument(cli, node):
    owner = funded(cli)
    pid = cli.json("project", "create", "q")["project_id"]
    cli("star", pid)

    def q(*args: str) -> Any:
        return json.loads(cli("query", *args).out)

    assert q("GetNodeStatus")["status"]["network"] == "devnet"
    assert cli.json("status")["network"] == "devnet"
    assert q("get-chain-stats")["stats"]["total_projects"] >= 1
    assert "mempool" in q("GetMempoolInfo")
    assert q("GetHealth")["live"] is True
    account = q("GetAccount", f"owner_address={owner}")
    assert account["account"]["owner_address"] == owner and account["storage_units"] == 1
    assert len(q("ListKeys", f"owner_address={owner[2:]}")["keys"]) == 1
    assert q("GetProject", f"project_id={pid}")["project"]["name"] == "q"
    assert q("GetProjectByName", f"owner_address={owner}", "name=q")["project"]["project_id"] == pid
    assert q("SearchProjects", "name_prefix=q")["projects"]
    stars = q("ListLinks", f"owner_address={owner}", "type=STAR")["links"]
    assert [s["target_project_id"] for s in stars] == [pid]
    assert q("ListLinks", f"owner_address={owner}", "type=FOLLOW")["links"] == []
    assert q("ListCustodyKeys", f"owner_address={owner}")["custody_keys"] == []

    block = q("GetBlock", "block_number=1")["block"]
    assert block["header"]["number"] == 1
    pages = q("ListBlocks", "page_size=2")
    assert len(pages["blocks"]) == 2 and pages["next_page_token"]
    everything = q("ListBlocks", "page_size=2", "--all")
    assert everything["next_page_token"] == "" and len(everything["blocks"]) > 2
    messages = q("ListMessages", "start_block=1", "page_size=200")["messages"]
    assert messages
    first = messages[0]["message"]["hash"]
    assert q("GetMessage", f"hash={first}")["message"]["message"]["hash"] == first
    activity = q("GetAccountActivity", f"owner_address={owner}", "--all")["messages"]
    assert {m["message"]["data"]["type"] for m in activity} >= {"MESSAGE_TYPE_SIGNER_ADD", "MESSAGE_TYPE_LINK_ADD"}

    key = "0x" + schema.account_key(bytes.fromhex(owner[2:])).hex()
    proof = q("GetOperationProof", f"key={key}")
    assert proof["state_root"].startswith("0x") and "proof" in proof
    proof_file = cli.home / "proof.json"
    proof_file.write_text(json.dumps(proof["proof"]))
    verified = q("VerifyOperationProof", f"proof=@{proof_file}", f"state_root={proof['state_root']}")
    assert verified["valid"] is True or verified["stale"] is True
    assert q("GetStorageQuotaProof", f"owner_address={owner}")["proof"]
    missing_ref = cli("query", "GetRef", f"project_id={pid}", "ref_name=refs/heads/main", ok=False)
    assert missing_ref.err.startswith("error: NOT_FOUND:")

    listing = cli.json("query", "--list")["rpcs"]
    names = {r["rpc"] for r in listing}
    assert {"GetProject", "ListRefs", "GetRefLog", "ListCommits", "GetCommitAncestors", "GetOperationProof"} <= names
    assert not names & {"SubmitMessage", "BatchSubmitMessages", "SubscribeBlocks", "SubscribeMessages"}


def test_errors_print_reason_codes(cli, node, tmp_path):
    none = cli("project", "create", "x", ok=False)
    assert (none.rc, none.err.split(":")[0:2]) == (1, ["error", " ACCOUNT_NOT_INITIALIZED"])
    funded(cli)
    cli("project", "create", "dup")
    taken = cli("project", "create", "DUP", ok=False)
    assert taken.rc == 1 and taken.err.startswith("error: NAME_TAKEN: ")
    assert taken.err.count("\n") == 1
    as_json = cli("--json", "project", "create", "Dup", ok=False)
    assert json.loads(as_json.out)["error"]["reason"] == "NAME_TAKEN"
    assert cli("project", "show", "0x" + "00" * 32, ok=False).err.startswith("error: NOT_FOUND: project not found")
    bad_field = cli("query", "GetProject", "nope=1", ok=False)
    assert bad_field.err.startswith("error: INVALID_ARGUMENT: GetProject has no field 'nope'")
    bad_len = cli("query", "GetAccount", "owner_address=0x1234", ok=False)
    assert bad_len.err.startswith("error: INVALID_ARGUMENT:")
    assert cli("query", "Nope", ok=False).err.startswith("error: UNKNOWN_RPC:")
    fund_bad = cli("account", "fund", "wallet", "--units", "0", "--authority", authority(node), ok=False)
    assert fund_bad.err.startswith("error: INVALID_FIELD:")
    offline = Cli(node, tmp_path / "offline")
    out = offline("--node", "127.0.0.1:1", "query", "GetNodeStatus", ok=False)
    assert out.err.startswith("error: UNAVAILABLE: ")


def test_real_subprocess(node, tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT), CHAINCTL_NODE=node.grpc_target, CHAINCTL_HOME=str(tmp_path / "h"))
    cmd = [sys.executable, "-m", "node.cli.main"]
    done = subprocess.run(
        [*cmd, "--json", "query", "GetNodeStatus"], env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["status"]["network"] == "devnet"
    created = subprocess.run(
        [*cmd, "keys", "create", "k", "--type", "p256"], env=env, capture_output=True, text=True, check=False
    )
    assert created.returncode == 0 and "address: 0x" in created.stdout
    assert (tmp_path / "h" / "keys" / "k.json").exists()
    failed = subprocess.run(
        [*cmd, "query", "GetProject", "project_id=0x" + "11" * 32], env=env, capture_output=True, text=True, check=False
    )
    assert failed.returncode == 1
    assert failed.stderr.startswith("error: NOT_FOUND: ")
    usage = subprocess.run([*cmd, "frobnicate"], env=env, capture_output=True, text=True, check=False)
    assert usage.returncode == 2
