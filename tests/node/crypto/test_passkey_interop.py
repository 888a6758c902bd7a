"""Passkey custody keys with a third-party stack: python-fido2 as the client, py_webauthn as a second verifier.

An assertion made from fido2's structures is accepted by the node's custody verification and by
py_webauthn; each fault is refused by both (except high S, which py_webauthn accepts and the chain does
not: wallets normalise S). Over a real node, every refusal carries its specific cause machine-readably:
`reason-code` stays CUSTODY_SIGNATURE_INVALID, `reason-values` holds `cause` (and REST `details.cause`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
import requests
from google.protobuf import json_format
from webauthn.helpers.exceptions import InvalidAuthenticationResponse

from chain.v1 import keychain_service_pb2, keychain_service_pb2_grpc
from chain.v1 import message_pb2 as pb
from node.crypto.custody import CustodySignatureError, verify_custody_signature
from node.crypto.webauthn import WebAuthnPolicy
from node.errors import REASON_VALUES, trailer
from node.params import ChainParams
from node.sdk.keys import Ed25519Key
from node.sdk.rpc import ChainClient, reason_of
from tests.fixtures.actors import RemoteActor, new_account
from tests.fixtures.gwproc import GatewayProcess
from tests.fixtures.nodeproc import NodeProcess
from tests.node.crypto.fido2_passkey import Fault, Fido2Passkey, cose_to_raw, spki_to_raw

ORIGIN = "http://localhost:5173"  # a devnet (rp_id localhost) dapp served by a local dev server
DEVNET = WebAuthnPolicy(rp_id="localhost")


def reason_values(err: grpc.RpcError) -> dict[str, str]:
    assert isinstance(err, grpc.Call)
    raw = trailer(err.trailing_metadata(), REASON_VALUES)
    assert raw is not None
    values: dict[str, str] = json.loads(raw)
    return values


# ---- the wallet side: key formats and assertions, no node ----


def test_cose_and_spki_public_keys_give_the_same_raw_key() -> None:
    passkey = Fido2Passkey(rp_id="localhost", origin=ORIGIN)
    raw = cose_to_raw(passkey.cose_key)
    assert len(raw) == 64
    assert raw == spki_to_raw(passkey.spki)


def test_a_fido2_assertion_is_accepted_by_the_node_verifier_and_by_py_webauthn() -> None:
    passkey = Fido2Passkey(rp_id="localhost", origin=ORIGIN)
    digest = os.urandom(32)
    sig = passkey.custody_signature(digest)
    assert verify_custody_signature(sig, digest, webauthn_policy=DEVNET) == passkey.address
    assert passkey.py_webauthn_verify(passkey.assertions[-1]) == 1


@pytest.mark.parametrize("fault", list(Fault), ids=lambda f: f.name)
def test_each_fault_is_refused_with_its_reason(fault: Fault) -> None:
    passkey = Fido2Passkey(rp_id="localhost", origin=ORIGIN, fault=fault)
    digest = os.urandom(32)
    with pytest.raises(CustodySignatureError) as refused:
        verify_custody_signature(passkey.custody_signature(digest), digest, webauthn_policy=DEVNET)
    assert refused.value.reason == fault.value
    if fault is Fault.HIGH_S:  # valid ECDSA to py_webauthn; the chain alone requires the low-S form
        assert passkey.py_webauthn_verify(passkey.assertions[-1]) == 1
    else:
        with pytest.raises(InvalidAuthenticationResponse):
            passkey.py_webauthn_verify(passkey.assertions[-1])


# ---- over a real node ----


def policy_of(node: NodeProcess) -> keychain_service_pb2.GetWebAuthnPolicyResponse:
    with grpc.insecure_channel(node.grpc_target) as channel:
        stub = keychain_service_pb2_grpc.KeychainServiceStub(channel)
        return stub.GetWebAuthnPolicy(keychain_service_pb2.GetWebAuthnPolicyRequest(), timeout=10)


@pytest.fixture
def enrolled(node: NodeProcess) -> Iterator[tuple[ChainClient, RemoteActor, Fido2Passkey]]:
    """An account whose keychain holds an admin passkey made from the network's discovered policy."""
    c = node.client()
    alice = new_account(c, node.authority())  # custody nonce 0 spent on the first SIGNER_ADD
    passkey = Fido2Passkey(rp_id=policy_of(node).rp_id, origin=ORIGIN)
    c.commit(alice.b.keychain_authorize(alice.wallet, 1, passkey, admin=True))
    yield c, alice, passkey


def test_devnet_webauthn_policy_is_discoverable(node: NodeProcess) -> None:
    policy = policy_of(node)
    assert policy.rp_id == "localhost"
    assert list(policy.allowed_origins) == []
    assert policy.origins_derived
    assert list(policy.algorithms) == [-7]
    assert policy.user_verification_required


def test_genesis_webauthn_policy_is_discoverable(tmp_path: Path) -> None:
    genesis = tmp_path / "genesis.json"
    origins = frozenset({"https://app.example.org", "https://example.org"})
    ChainParams(webauthn_rp_id="example.org", webauthn_origins=origins).save(genesis)
    proc = NodeProcess(tmp_path / "data", "--genesis", str(genesis)).start()
    try:
        policy = policy_of(proc)
    finally:
        proc.stop()
    assert policy.rp_id == "example.org"
    assert list(policy.allowed_origins) == sorted(origins)
    assert not policy.origins_derived


def test_passkey_signer_add_is_accepted_and_py_webauthn_agrees(
    enrolled: tuple[ChainClient, RemoteActor, Fido2Passkey],
) -> None:
    c, alice, passkey = enrolled
    delegated = Ed25519Key.generate()
    committed = c.commit(alice.b.signer_add(passkey, 2, key=delegated))[0]
    assert committed.message.data.type == pb.MESSAGE_TYPE_SIGNER_ADD
    assert passkey.py_webauthn_verify(passkey.assertions[-1]) >= 1


@pytest.mark.parametrize("fault", list(Fault), ids=lambda f: f.name)
def test_each_fault_is_refused_over_grpc_with_its_cause(
    enrolled: tuple[ChainClient, RemoteActor, Fido2Passkey], fault: Fault
) -> None:
    c, alice, passkey = enrolled
    passkey.fault = fault
    msg = alice.b.signer_add(passkey, 2, key=Ed25519Key.generate())
    with pytest.raises(grpc.RpcError) as refused:
        c.submit(msg)
    assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert reason_of(refused.value) == "CUSTODY_SIGNATURE_INVALID"
    assert reason_values(refused.value) == {"cause": fault.value, "hash": msg.hash.hex()}


def test_a_faulty_keychain_authorize_is_refused_with_its_cause(
    enrolled: tuple[ChainClient, RemoteActor, Fido2Passkey],
) -> None:
    c, alice, passkey = enrolled
    passkey.fault = Fault.MISSING_UV
    msg = alice.b.keychain_authorize(passkey, 2, Fido2Passkey(rp_id="localhost", origin=ORIGIN))
    with pytest.raises(grpc.RpcError) as refused:
        c.submit(msg)
    assert reason_of(refused.value) == "CUSTODY_SIGNATURE_INVALID"
    assert reason_values(refused.value)["cause"] == "WEBAUTHN_FLAGS"


def test_rest_shows_the_policy_and_the_cause(
    node: NodeProcess, enrolled: tuple[ChainClient, RemoteActor, Fido2Passkey]
) -> None:
    _, alice, passkey = enrolled
    gw = GatewayProcess(node.grpc_target).start()
    try:
        policy = requests.get(gw.url + "/v1/network/webauthn", timeout=10)
        passkey.fault = Fault.WRONG_ORIGIN
        msg = alice.b.signer_add(passkey, 2, key=Ed25519Key.generate())
        refused = requests.post(gw.url + "/v1/messages", json=json_format.MessageToDict(msg), timeout=10)
    finally:
        gw.stop()
    assert policy.status_code == 200
    assert policy.json() == {
        "rp_id": "localhost",
        "allowed_origins": [],
        "origins_derived": True,
        "algorithms": [-7],
        "user_verification_required": True,
    }
    assert refused.status_code == 403
    error = refused.json()["error"]
    assert error["code"] == "CUSTODY_SIGNATURE_INVALID"
    assert error["details"]["cause"] == "WEBAUTHN_ORIGIN"
