"""REST surface rules against the real `chain-gateway` and `chain-node` processes: a missing project is 404 on
every sub-resource, `Allow` names the methods a path really serves, and ref names are bare or 0x-hex."""

from __future__ import annotations

import pytest
import requests

from chain.v1 import rpc_pb2
from tests.fixtures.actors import new_account
from tests.fixtures.gwproc import GatewayProcess
from tests.fixtures.nodeproc import NodeProcess

MISSING = "0x" + "ee" * 32
HASH = "0x" + "ab" * 32
MAIN = b"refs/heads/main".hex()
SUB_RESOURCES = (
    "",
    "/activity",
    "/refs",
    f"/refs/{MAIN}",
    f"/refs/0x{MAIN}",
    f"/refs/{MAIN}/log",
    "/commits",
    f"/commits/{HASH}",
    f"/commits/{HASH}/ancestors",
    f"/commits/{HASH}/reactions",
    "/collaborators",
    "/merge-requests",
    f"/merge-requests/{HASH}",
)


@pytest.fixture(scope="module")
def empty_project(node: NodeProcess) -> str:
    """A project with no refs, commits, collaborators or merge requests."""
    c = node.client()
    try:
        actor = new_account(c, node.authority())
        c.commit(actor.b.project_create("bare"))
        req = rpc_pb2.GetProjectByNameRequest(owner_address=actor.address, name="bare")
        project_id: bytes = c.stub.GetProjectByName(req, timeout=10).project.project_id
        return "0x" + project_id.hex()
    finally:
        c.close()


@pytest.mark.parametrize("sub", SUB_RESOURCES)
def test_a_missing_project_is_404_on_every_sub_resource(gateway: GatewayProcess, sub: str) -> None:
    resp = requests.get(f"{gateway.url}/v1/projects/{MISSING}{sub}", timeout=10)
    assert resp.status_code == 404, resp.text
    assert resp.json()["error"]["code"] == "NOT_FOUND"


def test_an_existing_project_lists_empty_pages(gateway: GatewayProcess, empty_project: str) -> None:
    for sub, items in (
        ("/refs", "refs"),
        (f"/refs/{MAIN}/log", "entries"),
        ("/commits", "commits"),
        (f"/commits/{HASH}/reactions", "reactions"),
        ("/collaborators", "collaborators"),
        ("/merge-requests", "merge_requests"),
    ):
        resp = requests.get(f"{gateway.url}/v1/projects/{empty_project}{sub}", timeout=10)
        assert resp.status_code == 200, (sub, resp.text)
        assert resp.json() == {items: [], "next_cursor": ""}


def test_ref_names_are_bare_or_0x_hex(gateway: GatewayProcess, empty_project: str) -> None:
    for ref in (MAIN, "0x" + MAIN, "0X" + MAIN.upper()):
        resp = requests.get(f"{gateway.url}/v1/projects/{empty_project}/refs/{ref}/log", timeout=10)
        assert resp.status_code == 200, (ref, resp.text)
    missing = requests.get(f"{gateway.url}/v1/projects/{empty_project}/refs/0x{MAIN}", timeout=10)
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "NOT_FOUND"
    for bad in ("0x", "0x7", "7", "0xzz", "0x0x" + MAIN):
        resp = requests.get(f"{gateway.url}/v1/projects/{empty_project}/refs/{bad}/log", timeout=10)
        assert resp.status_code == 400, (bad, resp.text)
        assert resp.json()["error"]["details"]["field"] == "refHex"


@pytest.mark.parametrize(
    ("path", "allowed"),
    [
        ("/v1/messages/batch", "POST"),
        ("/v1/messages/dry-run", "POST"),
        ("/v1/messages", "GET, HEAD, POST"),
        ("/v1/projects/search", "GET, HEAD"),
        ("/v1/proofs/verify", "POST"),
        ("/v1/stats", "GET, HEAD"),
    ],
)
def test_allow_names_the_methods_a_path_serves(gateway: GatewayProcess, path: str, allowed: str) -> None:
    for method in ("OPTIONS", "GET", "HEAD", "POST", "PUT", "DELETE"):
        if method in allowed.split(", "):
            continue
        resp = requests.request(method, gateway.url + path, timeout=10)
        assert resp.status_code == 405, (method, path, resp.status_code, resp.text)
        assert resp.headers["Allow"] == allowed, (method, path)
        if method == "HEAD":
            assert resp.content == b""
            continue
        error = resp.json()["error"]
        assert error["code"] == "METHOD_NOT_ALLOWED"
        assert error["details"]["allowed_methods"] == allowed.split(", ")


@pytest.mark.parametrize(
    "path",
    [
        "/v1/stats",
        "/v1/blocks?limit=1",
        f"/v1/projects/{MISSING}",  # an error answer too
        "/v1/projects/search?q=",  # a 400
        "/v1/openapi.json",
    ],
)
def test_head_answers_as_get_without_the_body(gateway: GatewayProcess, path: str) -> None:
    """HEAD beside every GET (RFC 9110): the same status and headers, no body."""
    got = requests.get(gateway.url + path, timeout=10)
    head = requests.head(gateway.url + path, timeout=10)
    assert head.status_code == got.status_code, (path, head.status_code, got.status_code)
    assert head.content == b""
    assert head.headers["Content-Type"] == got.headers["Content-Type"]
    same = ("Content-Length", "X-Chain-Reason-Code")
    assert {k: head.headers.get(k) for k in same} == {k: got.headers.get(k) for k in same}, path


def test_a_message_hash_is_still_served_beside_the_fixed_paths(gateway: GatewayProcess) -> None:
    resp = requests.get(f"{gateway.url}/v1/messages/{HASH}", timeout=10)
    assert resp.status_code == 404 and resp.json()["error"]["code"] == "NOT_FOUND"
    assert requests.get(f"{gateway.url}/v1/projects/{MISSING}", timeout=10).status_code == 404
