"""Every REST read route against data written through the REST write path of the real `chain-gateway`.

A module fixture builds a small world by POSTing signed messages to the gateway (protobuf JSON and binary
protobuf, single and batch): two funded accounts, custody keys (one revoked), a project with commits, two
refs (one whose name is not valid UTF-8), a collaborator, a fork with a merge request, links, a reaction, a
verification, and 210 account-data messages so lists can overflow a 200-item page. Every answer is checked
against the OpenAPI document (openapi-core response validation) and the spec's shape rules field by field.
"""

from __future__ import annotations

import importlib.metadata
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import pytest
import requests
from google.protobuf import json_format
from openapi_core import Config, OpenAPI
from openapi_core.datatypes import RequestParameters

from chain.v1 import message_pb2 as pb
from chain.v1 import rpc_pb2
from node.sdk.keys import P256Key, Secp256k1Key
from node.storage import schema
from tests.fixtures.actors import RemoteActor, authority_builder
from tests.fixtures.gwproc import GatewayProcess
from tests.fixtures.nodeproc import NodeProcess
from tests.harness import commit_meta

FAR = 4_102_444_800  # 2100-01-01: a custody key expiry that is not "never"
MAIN = b"refs/heads/main"
WEIRD = b"refs/heads/\xff\xfe-w\x80ird"  # not valid UTF-8
PROTOBUF = {"Content-Type": "application/x-protobuf"}


def hx(b: bytes) -> str:
    return "0x" + b.hex()


@dataclass
class _Request:
    """openapi_core.protocols.Request for a call the test made."""

    host_url: str
    path: str
    method: str
    parameters: RequestParameters
    content_type: str = "application/json"
    body: bytes | None = None


@dataclass
class _Response:
    status_code: int
    data: bytes
    content_type: str
    headers: dict[str, str]


class Api:
    """`requests` against a gateway; every answer is validated against the gateway's OpenAPI document."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.session = requests.Session()
        self.doc = self.session.get(base + "/v1/openapi.json", timeout=10).json()
        self.openapi = OpenAPI.from_dict(self.doc, config=Config(spec_validator_cls=None))

    def call(self, method: str, path: str, expect: int = 200, **kw: Any) -> Any:
        r = self.session.request(method, self.base + path, timeout=30, **kw)
        assert r.status_code == expect, (method, path, r.status_code, r.text[:800])
        assert r.headers["Content-Type"].startswith("application/json")
        url = urlsplit(r.url)
        req = _Request(self.base, url.path, method.lower(), RequestParameters())
        resp = _Response(r.status_code, r.content, "application/json", dict(r.headers))
        self.openapi.validate_response(req, resp)  # raises when the answer breaks its documented schema
        return r.json()

    def get(self, path: str, expect: int = 200, **kw: Any) -> Any:
        return self.call("GET", path, expect, **kw)

    def post(self, path: str, expect: int = 200, **kw: Any) -> Any:
        return self.call("POST", path, expect, **kw)

    # ---- the write path ----
    def submit_json(self, msg: pb.Message) -> str:
        out = self.post("/v1/messages", 202, json=json_format.MessageToDict(msg))
        assert out == {"hash": hx(msg.hash), "accepted": True}
        return str(out["hash"])

    def submit_binary(self, msg: pb.Message) -> str:
        out = self.post("/v1/messages", 202, data=msg.SerializeToString(), headers=PROTOBUF)
        assert out == {"hash": hx(msg.hash), "accepted": True}
        return str(out["hash"])

    def batch_json(self, *msgs: pb.Message) -> list[str]:
        body = {"messages": [json_format.MessageToDict(m, preserving_proto_field_name=True) for m in msgs]}
        return self._accepted(self.post("/v1/messages/batch", json=body), msgs)

    def batch_binary(self, *msgs: pb.Message) -> list[str]:
        body = rpc_pb2.BatchSubmitMessagesRequest(messages=msgs).SerializeToString()
        return self._accepted(self.post("/v1/messages/batch", data=body, headers=PROTOBUF), msgs)

    @staticmethod
    def _accepted(out: dict[str, Any], msgs: tuple[pb.Message, ...]) -> list[str]:
        results = out["results"]
        assert [r["accepted"] for r in results] == [True] * len(msgs), results
        assert [r["hash"] for r in results] == [hx(m.hash) for m in msgs]
        return [str(r["hash"]) for r in results]

    def wait_committed(self, hashes: list[str], timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        for h in hashes:
            while self.session.get(f"{self.base}/v1/messages/{h}", timeout=10).status_code != 200:
                assert time.monotonic() < deadline, f"{h} not committed"
                time.sleep(0.03)

    def commit(self, *msgs: pb.Message) -> None:
        self.wait_committed(self.batch_json(*msgs))


@dataclass
class World:
    api: Api
    node: NodeProcess
    alice: RemoteActor
    bob: RemoteActor
    p256: P256Key
    admin_key: Secp256k1Key
    revoked_key: Secp256k1Key
    verified: Secp256k1Key
    project: bytes
    fork: bytes
    request_id: bytes
    commits: list[pb.CommitMeta]
    create_msg: pb.Message

    @property
    def a(self) -> str:
        return hx(self.alice.address)

    @property
    def b(self) -> str:
        return hx(self.bob.address)

    @property
    def p(self) -> str:
        return hx(self.project)


@pytest.fixture(scope="module")
def world(node: NodeProcess, gateway: GatewayProcess) -> World:
    api = Api(gateway.url)
    auth = authority_builder(node.authority())
    alice, bob = RemoteActor(), RemoteActor()
    api.commit(
        alice.b.signer_add(alice.wallet, 0),
        bob.b.signer_add(bob.wallet, 0),
        auth.storage_grant(alice.address, 5),
        auth.storage_grant(bob.address, 5),
    )
    p256 = P256Key.generate()
    admin_key, revoked_key, verified = (Secp256k1Key.generate() for _ in range(3))
    keychain = [
        alice.b.keychain_authorize(alice.wallet, 1, p256, expires_at=FAR),
        alice.b.keychain_authorize(alice.wallet, 2, admin_key, admin=True),
        alice.b.keychain_authorize(alice.wallet, 3, revoked_key),
    ]
    api.wait_committed(api.batch_binary(*keychain))
    api.wait_committed([api.submit_json(alice.b.keychain_revoke(alice.wallet, 4, revoked_key.address))])

    create = alice.b.project_create("gw-demo", "a demo project")
    api.wait_committed([api.submit_binary(create)])
    project = bytes(create.hash)
    c1 = commit_meta(1)
    c2 = commit_meta(2, c1.hash)
    c3 = commit_meta(3, c2.hash)
    api.wait_committed([api.submit_json(alice.b.commit_bundle(project, [c1, c2, c3]))])
    api.commit(
        alice.b.ref_update(project, MAIN, c3.hash, 1),
        alice.b.ref_update(project, WEIRD, c1.hash, 1),
        alice.b.collaborator_add(project, bob.address, pb.PERMISSION_WRITE),
        alice.b.verification_add(verified),
        alice.b.account_data(pb.ACCOUNT_FIELD_DISPLAY_NAME, "Alice"),
    )
    api.commit(alice.b.ref_update(project, WEIRD, c2.hash, 2, old_hash=c1.hash))
    fork = bob.b.fork(project, "gw-demo-fork")
    api.commit(fork, bob.b.follow(alice.address), bob.b.star(project), bob.b.like(project, c3.hash))
    mr = bob.b.merge_request_add(project, bytes(fork.hash), WEIRD, MAIN, "please merge")
    api.commit(mr)
    for start in (0, 100, 200):  # 210 more messages: lists that overflow one page
        n = min(100, 210 - start)
        api.commit(*(alice.b.account_data(pb.ACCOUNT_FIELD_BIO, f"bio {start + i}") for i in range(n)))
    return World(
        api, node, alice, bob, p256, admin_key, revoked_key, verified, project, bytes(fork.hash), bytes(mr.hash),
        [c1, c2, c3], create,
    )  # fmt: skip


CUSTODY_FIELDS = {"key_id", "signature_type", "public_key", "admin", "expires_at", "added_at", "revoked_at", "status"}


def test_account_summary(world: World) -> None:
    acc = world.api.get(f"/v1/accounts/{world.a}")
    assert acc["owner_address"] == world.a
    assert acc["custody_nonce"] == "5" and isinstance(acc["custody_nonce"], str)  # 1 signer add + 4 keychain
    assert acc["display_name"] == "Alice"
    assert acc["storage_units"] == 5
    assert acc["project_count"] == 1
    assert acc["custody_key_count"] == 2  # active keys; the revoked one stays listed
    assert {k["key_id"] for k in acc["custody_keys"]} == {
        hx(world.p256.address),
        hx(world.admin_key.address),
        hx(world.revoked_key.address),
    }
    assert all(set(k) == CUSTODY_FIELDS for k in acc["custody_keys"])
    [key] = acc["keys"]
    assert key["owner_address"] == world.a and key["key"] == hx(world.alice.key.public_key)
    assert key["scope"] == "owner"
    [verification] = acc["verifications"]
    assert verification["address"] == hx(world.verified.address)
    # Checksummed (mixed-case) addresses are accepted; answers are lower case.
    mixed = "0x" + world.alice.address.hex().upper()
    assert world.api.get(f"/v1/accounts/{mixed}")["owner_address"] == world.a
    # Any address is an account: an unknown one reads as zero counters.
    empty = world.api.get(f"/v1/accounts/{hx(bytes(20))}")
    assert empty["custody_nonce"] == "0" and empty["custody_keys"] == [] and empty["storage_units"] == 0


def test_custody_keys_shape(world: World) -> None:
    page = world.api.get(f"/v1/accounts/{world.a}/custody-keys?limit=1000")
    assert page["next_cursor"] == ""
    keys = {k["key_id"]: k for k in page["custody_keys"]}
    assert all(set(k) == CUSTODY_FIELDS for k in keys.values())
    p256 = keys[hx(world.p256.address)]
    assert p256["signature_type"] == 2
    assert p256["public_key"] == hx(world.p256.public_key[-64:])
    assert p256["admin"] is False
    assert p256["expires_at"] == str(FAR)
    assert p256["status"] == "active" and p256["revoked_at"] == 0
    assert isinstance(p256["added_at"], int) and p256["added_at"] > 0
    admin = keys[hx(world.admin_key.address)]
    assert admin["signature_type"] == 1 and admin["admin"] is True
    assert admin["expires_at"] == "0"  # "0" = never
    revoked = keys[hx(world.revoked_key.address)]
    assert revoked["status"] == "revoked"
    assert isinstance(revoked["revoked_at"], int) and revoked["revoked_at"] >= revoked["added_at"] > 0
    one = world.api.get(f"/v1/accounts/{world.a}/custody-keys/{hx(world.revoked_key.address)}")
    assert one == revoked


def test_custody_key_absent_is_404(world: World) -> None:
    absent = hx(bytes([0x11]) * 20)
    err = world.api.get(f"/v1/accounts/{world.a}/custody-keys/{absent}", 404)
    assert err["error"]["code"] == "NOT_FOUND"
    assert set(err["error"]) == {"code", "message", "details"}
    err = world.api.get(f"/v1/accounts/{world.a}/custody-keys/0x1234", 400)
    assert err["error"]["details"]["field"] == "key_id"


def test_custody_keys_cursor_walk(world: World) -> None:
    full = world.api.get(f"/v1/accounts/{world.a}/custody-keys")["custody_keys"]
    seen: list[dict[str, Any]] = []
    cursor = ""
    for _ in range(10):
        page = world.api.get(f"/v1/accounts/{world.a}/custody-keys", params={"limit": 1, "cursor": cursor})
        assert len(page["custody_keys"]) <= 1
        seen += page["custody_keys"]
        cursor = page["next_cursor"]
        if not cursor:
            break
    assert seen == full and len(full) == 3


def test_limit_is_capped_at_200_and_cursor_walks_every_item(world: World) -> None:
    first = world.api.get("/v1/messages?limit=1000")
    assert len(first["messages"]) == 200 and first["next_cursor"]
    total = world.api.get("/v1/stats")["total_messages"]
    items = list(first["messages"])
    cursor = first["next_cursor"]
    while cursor:
        page = world.api.get("/v1/messages", params={"limit": 1000, "cursor": cursor})
        items += page["messages"]
        cursor = page["next_cursor"]
    assert len(items) == int(total)
    assert len({m["message"]["hash"] for m in items}) == len(items)
    assert [int(m["event_id"]) for m in items] == sorted(int(m["event_id"]) for m in items)
    activity = world.api.get(f"/v1/accounts/{world.a}/activity?limit=1000")
    assert len(activity["messages"]) == 200 and activity["next_cursor"]
    assert world.api.get(f"/v1/accounts/{world.a}/activity")["messages"].__len__() == 50  # default page
    bad = world.api.get("/v1/messages?cursor=bm90LWEtdG9rZW4", 400)
    assert bad["error"]["code"] == "INVALID_ARGUMENT" and bad["error"]["details"]["field"] == "page_token"


def test_merge_requests(world: World) -> None:
    listed = world.api.get(f"/v1/projects/{world.p}/merge-requests")
    [mr] = listed["merge_requests"]
    assert listed["next_cursor"] == ""
    assert mr["request_id"] == hx(world.request_id)
    assert mr["requester_owner_address"] == world.b
    assert mr["source_project_id"] == hx(world.fork)
    assert mr["target_project_id"] == world.p
    assert mr["source_ref"] == WEIRD.hex() and mr["target_ref"] == MAIN.hex()
    assert bytes.fromhex(mr["source_ref"]) == WEIRD  # a name that is not UTF-8 survives the round trip
    assert mr["status"] == "open" and mr["title"] == "please merge"
    assert isinstance(mr["created_at"], str)
    assert world.api.get(f"/v1/projects/{world.p}/merge-requests/{hx(world.request_id)}") == mr
    assert world.api.get(f"/v1/accounts/{world.b}/merge-requests")["merge_requests"] == [mr]
    assert world.api.get(f"/v1/accounts/{world.a}/merge-requests")["merge_requests"] == []
    err = world.api.get(f"/v1/projects/{world.p}/merge-requests/{hx(bytes(32))}", 404)
    assert err["error"]["code"] == "NOT_FOUND"


def test_projects(world: World) -> None:
    project = world.api.get(f"/v1/projects/{world.p}")
    assert project["project_id"] == world.p and project["owner_address"] == world.a
    assert project["name"] == "gw-demo" and project["description"] == "a demo project"
    assert project["status"] == "active" and project["visibility"] == "public"
    assert project["forked_from"] == "0x"
    assert isinstance(project["created_at"], str) and int(project["created_at"]) > 0
    assert project["commit_count"] == 3 and project["ref_count"] == 2 and project["star_count"] == 1
    fork = world.api.get(f"/v1/projects/{hx(world.fork)}")
    assert fork["forked_from"] == world.p and fork["owner_address"] == world.b
    owned = world.api.get(f"/v1/projects?owner_address={world.a}")
    assert [p["project_id"] for p in owned["projects"]] == [world.p]
    everything = world.api.get("/v1/projects?limit=1000")["projects"]
    assert {world.p, hx(world.fork)} <= {p["project_id"] for p in everything}
    found = world.api.get("/v1/projects/search?prefix=GW-DEMO")["projects"]
    assert [p["name"] for p in found] == ["gw-demo", "gw-demo-fork"]
    by_name = world.api.get(f"/v1/accounts/{world.a}/projects/GW-Demo")
    assert by_name == project
    assert world.api.get(f"/v1/accounts/{world.a}/projects/nope", 404)["error"]["code"] == "NOT_FOUND"
    assert world.api.get(f"/v1/projects/{hx(bytes(32))}", 404)["error"]["code"] == "NOT_FOUND"
    err = world.api.get("/v1/projects/search", 400)["error"]
    assert err["details"]["field"] == "prefix" and err["details"]["in"] == "query"


def test_refs_and_ref_log(world: World) -> None:
    c1, c2, c3 = (hx(c.hash) for c in world.commits)
    refs = world.api.get(f"/v1/projects/{world.p}/refs")["refs"]
    assert {r["name"]: r["hash"] for r in refs} == {MAIN.hex(): c3, WEIRD.hex(): c2}
    weird = world.api.get(f"/v1/projects/{world.p}/refs/{WEIRD.hex()}")
    assert weird["name"] == WEIRD.hex() and bytes.fromhex(weird["name"]) == WEIRD
    assert weird["hash"] == c2 and weird["nonce"] == "2" and weird["owner_address"] == world.a
    assert world.api.get(f"/v1/projects/{world.p}/refs/{WEIRD.hex().upper()}") == weird
    log = world.api.get(f"/v1/projects/{world.p}/refs/{WEIRD.hex()}/log")["entries"]
    assert [(e["old_hash"], e["new_hash"], e["nonce"]) for e in log] == [(c1, c2, "2"), ("0x", c1, "1")]
    assert all(e["owner_address"] == world.a and e["ref_name"] == WEIRD.hex() for e in log)
    assert all(isinstance(e["block_number"], str) for e in log)
    assert world.api.get(f"/v1/projects/{world.p}/refs/{b'refs/heads/none'.hex()}", 404)
    err = world.api.get(f"/v1/projects/{world.p}/refs/not-hex", 400)["error"]
    assert err["details"]["field"] == "refHex"


def test_commits(world: World) -> None:
    c1, c2, c3 = (hx(c.hash) for c in world.commits)
    listed = world.api.get(f"/v1/projects/{world.p}/commits")["commits"]
    assert [c["hash"] for c in listed] == [c3, c2, c1]  # newest first
    commit = world.api.get(f"/v1/projects/{world.p}/commits/{c3}")
    assert commit["parents"] == [c2] and commit["title"] == "commit 3"
    assert commit["author_address"] in (world.a, "0x")
    assert commit["sequence"] == "3" and isinstance(commit["author_timestamp"], str)
    ancestors = world.api.get(f"/v1/projects/{world.p}/commits/{c3}/ancestors")["commits"]
    assert [c["hash"] for c in ancestors] == [c2, c1]
    paged = world.api.get(f"/v1/projects/{world.p}/commits/{c3}/ancestors?limit=1&first_parent=true")
    assert [c["hash"] for c in paged["commits"]] == [c2] and paged["next_cursor"]
    # A fork resolves its source's commits.
    assert world.api.get(f"/v1/projects/{hx(world.fork)}/commits/{c3}")["hash"] == c3
    assert world.api.get(f"/v1/projects/{world.p}/commits/{hx(bytes(32))}", 404)


def test_collaborators_activity_and_social(world: World) -> None:
    [collab] = world.api.get(f"/v1/projects/{world.p}/collaborators")["collaborators"]
    assert collab["owner_address"] == world.b and collab["permission"] == "write"
    assert collab["project_id"] == world.p
    activity = world.api.get(f"/v1/projects/{world.p}/activity?limit=200")["messages"]
    types = [m["message"]["data"]["type"] for m in activity]
    assert types[-1] == "project_create" and "commit_bundle" in types and "ref_update" in types
    created = activity[-1]["message"]["data"]
    assert created["owner_address"] == world.a and created["project_create"]["name"] == "gw-demo"
    assert "ref_update" not in created  # only the body that is set appears
    links = world.api.get(f"/v1/accounts/{world.b}/links")["links"]
    assert {(link["type"], link["target_owner_address"], link["target_project_id"]) for link in links} == {
        ("follow", world.a, "0x"),
        ("star", "0x", world.p),
    }
    follows = world.api.get(f"/v1/accounts/{world.b}/links?type=follow")["links"]
    assert [link["type"] for link in follows] == ["follow"]
    followers = world.api.get(f"/v1/links/by-target?target_owner_address={world.a}")["links"]
    assert [link["owner_address"] for link in followers] == [world.b]
    stars = world.api.get(f"/v1/links/by-target?target_project_id={world.p}")["links"]
    assert [link["owner_address"] for link in stars] == [world.b]
    [like] = world.api.get(f"/v1/accounts/{world.b}/reactions")["reactions"]
    assert like["type"] == "like" and like["commit_hash"] == hx(world.commits[2].hash)
    by_commit = world.api.get(f"/v1/projects/{world.p}/commits/{hx(world.commits[2].hash)}/reactions")
    assert [r["owner_address"] for r in by_commit["reactions"]] == [world.b]
    [verification] = world.api.get(f"/v1/accounts/{world.a}/verifications")["verifications"]
    assert verification["owner_address"] == world.a and verification["address"] == hx(world.verified.address)


def test_delegated_keys(world: World) -> None:
    [key] = world.api.get(f"/v1/accounts/{world.a}/keys")["keys"]
    assert key["owner_address"] == world.a and key["scope"] == "owner" and key["allowed_projects"] == []
    assert isinstance(key["added_at"], int)
    assert world.api.get(f"/v1/accounts/{world.a}/keys/{key['key']}") == key
    assert world.api.get(f"/v1/accounts/{world.a}/keys/{hx(bytes(32))}", 404)["error"]["code"] == "NOT_FOUND"


def test_blocks_and_messages(world: World) -> None:
    committed = world.api.get(f"/v1/messages/{hx(world.create_msg.hash)}")
    msg = committed["message"]
    assert msg["hash"] == hx(world.create_msg.hash)
    assert msg["signer"] == hx(world.alice.key.public_key)
    assert msg["data_bytes"] == hx(world.create_msg.data_bytes)
    assert msg["data"]["network"] == "devnet" and msg["data"]["type"] == "project_create"
    assert isinstance(msg["data"]["timestamp"], str) and isinstance(committed["block_number"], str)
    number = committed["block_number"]
    block = world.api.get(f"/v1/blocks/{number}")
    assert block["header"]["number"] == number
    assert hx(world.create_msg.hash) in {m["hash"] for c in block["chunks"] for m in c["messages"]}
    recent = world.api.get("/v1/blocks?limit=3")["blocks"]
    numbers = [int(b["header"]["number"]) for b in recent]
    assert numbers == sorted(numbers, reverse=True) and all(b["chunks"] == [] for b in recent)
    with_chunks = world.api.get(f"/v1/blocks?limit=1&include_chunks=true&cursor={''}")["blocks"]
    assert with_chunks[0]["header"]["number"] == recent[0]["header"]["number"]
    ranged = world.api.get(f"/v1/messages?start_block={number}&end_block={number}")["messages"]
    assert ranged and all(m["block_number"] == number for m in ranged)
    assert world.api.get(f"/v1/blocks/{2**64 - 1}", 404)["error"]["code"] == "NOT_FOUND"
    assert world.api.get(f"/v1/blocks/{2**64}", 400)["error"]["details"]["field"] == "number"
    assert world.api.get(f"/v1/messages/{hx(bytes(32))}", 404)["error"]["code"] == "NOT_FOUND"


def test_proofs(world: World) -> None:
    key = schema.account_key(world.alice.address)
    got = world.api.get(f"/v1/proofs/operation/{hx(key)}")
    assert got["proof"]["exists"] is True and got["proof"]["key"] == hx(key)
    assert isinstance(got["block_number"], str)
    verified = world.api.post("/v1/proofs/verify", json={"proof": got["proof"], "state_root": got["state_root"]})
    assert verified["valid"] is True or verified["stale"] is True
    tampered = dict(got["proof"], value="0x00")
    assert world.api.post("/v1/proofs/verify", json={"proof": tampered})["valid"] is False
    absent = schema.account_key(b"\x42" * 20)
    excl = world.api.get(f"/v1/proofs/exclusion/{hx(absent)}")
    assert excl["proof"]["exists"] is False
    assert world.api.get(f"/v1/proofs/operation/{hx(absent)}", 404)["error"]["code"] == "NOT_FOUND"
    assert world.api.get(f"/v1/proofs/exclusion/{hx(key)}", 400)["error"]["details"]["field"] == "key"
    quota = world.api.get(f"/v1/accounts/{world.a}/storage-proof")
    assert quota["owner_address"] == world.a and quota["active_units"] == 5
    assert len(quota["grant_proofs"]) == 1 and quota["active_grants"][0]["units"] == 5


def test_node_status_reports_the_installed_package_version(world: World) -> None:
    assert world.api.get("/v1/node/status")["version"] == importlib.metadata.version("chain-node")


def test_node_operations(world: World) -> None:
    status = world.api.get("/v1/node/status")
    assert status["network"] == "devnet" and int(status["block_height"]) > 0
    assert isinstance(status["block_height"], str) and isinstance(status["mempool_size"], int)
    assert world.api.get("/v1/health") == {"live": True, "ready": True, "detail": "serving"}
    stats = world.api.get("/v1/stats")
    assert int(stats["total_projects"]) == 2 and int(stats["total_accounts"]) >= 3
    mempool = world.api.get("/v1/mempool")
    assert mempool["capacity"] == 100_000 and isinstance(mempool["counts"], list)
    err = world.api.get("/v1/snapshot", 404)["error"]
    assert err["code"] == "NOT_FOUND"
    c = world.node.client()
    assert c.admin is not None
    made = c.admin.CreateSnapshot(rpc_pb2.CreateSnapshotRequest(), timeout=30).snapshot
    c.close()
    snap = world.api.get("/v1/snapshot")
    assert snap["block_number"] == str(made.block_number) and snap["state_root"] == hx(made.state_root)
    assert snap["name"] == made.name
