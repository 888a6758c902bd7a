"""A large BatchSubmitMessages over real sockets gets the same per-message results whether its signatures are
checked by a verify worker process (only refusals come back from it) or inline in the main process (the
path small batches take), bad signatures, wrong hashes, duplicates and messages that depend on earlier
ones in the same batch included; the accepted ones are committed and leave the mempool."""

from __future__ import annotations

from pathlib import Path

import pytest

from chain.v1 import message_pb2 as pb
from chain.v1 import rpc_pb2
from node.sdk.messages import sign_message
from node.server.write.verify import INLINE_BELOW
from tests.fixtures.actors import new_account
from tests.fixtures.nodeproc import NodeProcess
from tests.harness import commit_meta


def _forged(good: pb.Message, **changes: bytes) -> pb.Message:
    msg = pb.Message()
    msg.CopyFrom(good)
    for k, v in changes.items():
        setattr(msg, k, v)
    return msg


def _batch(node: NodeProcess) -> tuple[list[pb.Message], list[tuple[int, bool, str]]]:
    """A batch of 2 * INLINE_BELOW + 8 messages with a defect here and there, and the results it must get."""
    c = node.client()
    try:
        alice = new_account(c, node.authority(), units=10)
        pending = alice.b.account_data(pb.ACCOUNT_FIELD_BIO, "already pending")
        assert c.batch([pending])[0].accepted
    finally:
        c.close()
    create = alice.b.project_create("admitted")
    msgs: list[pb.Message] = [create]
    want: list[tuple[int, bool, str]] = [(0, True, "")]
    for i in range(1, 2 * INLINE_BELOW + 8):
        follow = alice.b.follow(i.to_bytes(20, "big"))
        if i == 3:
            msgs.append(_forged(follow, signature=bytes(64)))
            want.append((i, False, "INVALID_SIGNATURE"))
        elif i == 7:
            msgs.append(_forged(follow, hash=b"\x00" * 32))
            want.append((i, False, "HASH_MISMATCH"))
        elif i == 11:
            msgs.append(msgs[5])  # the same message again, in the same batch
            want.append((i, False, "DUPLICATE_MESSAGE"))
        elif i == 13:
            msgs.append(pending)  # already in the mempool
            want.append((i, False, "DUPLICATE_MESSAGE"))
        elif i == 17:
            data = pb.MessageData()
            data.CopyFrom(follow.data)
            data.network = pb.NETWORK_MAINNET
            msgs.append(sign_message(data, alice.key))  # verifies, then fails validation
            want.append((i, False, "WRONG_NETWORK"))
        elif i == 21:  # depends on the project created at index 0, still pending
            msgs.append(alice.b.commit_bundle(create.hash, [commit_meta(i)]))
            want.append((i, True, ""))
        else:
            msgs.append(follow)
            want.append((i, True, ""))
    return msgs, want


@pytest.mark.parametrize("workers", ["1", "0"])
def test_a_large_batch_gets_per_message_results_from_the_worker_as_inline(tmp_path: Path, workers: str) -> None:
    node = NodeProcess(tmp_path / "data", "--verify-workers", workers).start(timeout=120)
    try:
        msgs, want = _batch(node)
        c = node.client()
        try:
            results = c.batch(msgs)  # the first large batch waits for the worker if it is still starting
            assert [(r.index, r.accepted, r.reason_code) for r in results] == want
            assert [r.hash for r in results] == [m.hash for m in msgs]
            assert all(r.detail for r in results if not r.accepted)
            for r in results:
                if r.accepted:
                    assert c.wait_committed(r.hash).message.hash == r.hash
            info = c.stub.GetMempoolInfo(rpc_pb2.GetMempoolInfoRequest()).mempool
            assert info.size == 0
        finally:
            c.close()
    finally:
        node.stop()
