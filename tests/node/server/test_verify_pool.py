"""The verify worker pool warms up in the background (the node serves without waiting for a worker to spawn)
and still verifies a large batch exactly like the inline path, bad signatures included."""

from __future__ import annotations

from node.server.write.verify import INLINE_BELOW, Verifier
from tests.harness import Harness, commit_meta


async def test_a_large_batch_after_a_background_warm_up_gets_the_inline_verdicts(tmp_path) -> None:
    h = Harness(tmp_path / "chain")
    alice = h.actor()
    msgs = [alice.b.commit_bundle(b"\x01" * 32, [commit_meta(i)]) for i in range(INLINE_BELOW * 2)]
    msgs[3].signature = bytes(64)  # one forged signature in the batch
    pooled = Verifier(1, 256 * 1024)
    inline = Verifier(0, 256 * 1024)
    try:
        pooled.start_warm_up()  # returns at once; the batch below waits for the worker if it is not up yet
        got = await pooled.verify(msgs)
        want = await inline.verify(msgs)
    finally:
        pooled.close()
        inline.close()
        h.chain.close()
    assert got == want
    assert [v.reason != "" for v in got].count(True) == 1 and got[3].reason != ""
