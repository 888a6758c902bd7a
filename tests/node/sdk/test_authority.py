"""The devnet storage authority: its file (written by the node, read by clients) and its bootstrap SIGNER_ADD."""

from __future__ import annotations

import json
import stat
import time

import pytest

from chain.v1 import message_pb2 as pb
from node.chain import Chain
from node.envelope import signer_add_message
from node.errors import Reason
from node.sdk.authority import Authority
from node.sdk.messages import MessageBuilder
from node.server.devnet import AUTHORITY_FILE, bootstrap_message, new_devnet


def test_devnet_writes_the_authority_file_once_with_its_three_fields(tmp_path):
    params, authority = new_devnet(tmp_path)
    path = tmp_path / AUTHORITY_FILE
    doc = json.loads(path.read_text())
    assert set(doc) == {"address", "wallet_private_key", "ed25519_private_key"}
    assert doc["address"] == "0x" + authority.wallet.address.hex()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert params.network == pb.NETWORK_DEVNET
    assert params.storage_authorities == frozenset({authority.wallet.address})
    loaded = Authority.load(path)
    assert loaded.to_json() == authority.to_json()
    with pytest.raises(FileExistsError):
        new_devnet(tmp_path)


def test_bootstrap_is_the_sdk_signer_add_and_the_first_block_accepts_it(tmp_path):
    params, authority = new_devnet(tmp_path / "data")
    msg = bootstrap_message(tmp_path / "data")
    # The same SIGNER_ADD the SDK's builder makes (both signatures are deterministic), save the clock.
    built = MessageBuilder(authority.wallet.address, authority.key).signer_add(authority.wallet, 0)
    auth, sdk_auth = msg.data.signer_add.auth, built.data.signer_add.auth
    if (msg.data.timestamp, auth.valid_after) == (built.data.timestamp, sdk_auth.valid_after):
        assert msg == built
    assert msg.data.type == pb.MESSAGE_TYPE_SIGNER_ADD
    assert bytes(msg.data.owner_address) == authority.wallet.address
    assert bytes(msg.signer) == bytes(msg.data.signer_add.key) == authority.key.public_key
    assert (auth.nonce, msg.data.signer_add.scope) == (0, pb.KEY_SCOPE_OWNER)

    chain = Chain.open(tmp_path / "chain", params)
    try:
        out = chain.build(int(time.time() * 1000), [msg], verify=True)
        assert not out.dropped, [(d.error.reason, d.error.detail) for d in out.dropped]
        assert [bytes(m.message.hash) for m in out.applied] == [bytes(msg.hash)]
        # Signed by another wallet, the same message is refused: the custody check is real.
        intruder = Authority.generate().wallet
        forged = signer_add_message(
            authority.wallet.address, intruder, 0, authority.key, network=pb.NETWORK_DEVNET, now=int(time.time())
        )
        refused = chain.build(int(time.time() * 1000), [forged], verify=True)
        assert not refused.applied
        assert [d.error.reason for d in refused.dropped] == [Reason.CUSTODY_KEY_UNKNOWN]
    finally:
        chain.close()
