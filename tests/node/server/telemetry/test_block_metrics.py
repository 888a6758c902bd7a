"""Block metrics from the node's own objects on a real LMDB chain: messages accepted into the mempool and
then left out of the block (their timestamps went stale by block time) are counted by reason, the block
still counts, and nothing is counted as committed. The block clock runs 400 s ahead of the submission
clock: the harness's controllable time, the same way tests/harness.py drives the state transition."""

from __future__ import annotations

from pathlib import Path

from node import constants as C
from node.observability.metrics import MetricsEndpoint
from node.server.events import EventHub
from node.server.ordering.orderer import SoloOrderer
from node.server.telemetry.node_metrics import NodeMetrics
from node.server.telemetry.spans import NodeTelemetry
from node.server.write.mempool import Mempool
from node.server.write.pipeline import Pipeline
from node.server.write.verify import Verifier
from tests.fixtures.scrape import scrape
from tests.harness import Harness


async def test_dropped_messages_are_counted_by_reason(tmp_path: Path):
    h = Harness(tmp_path / "chain")
    actor = h.actor(units=1)
    endpoint = MetricsEndpoint("chain-node", "127.0.0.1:0")
    port = endpoint.start()
    verifier = Verifier(0, C.MAX_MESSAGE_BYTES)
    try:
        telemetry = NodeTelemetry(None, NodeMetrics(endpoint))
        mempool = Mempool(100)
        pipeline = Pipeline(h.chain, mempool, verifier, clock=h.clock, telemetry=telemetry)
        orderer = SoloOrderer(
            h.chain,
            mempool,
            pipeline,
            EventHub(10),
            block_interval=1,
            empty_block_interval=60,
            clock=lambda: h.clock() + 400,
        )
        msgs = [actor.b.project_create(f"p{i}") for i in range(3)]
        outcomes = await pipeline.submit(msgs)
        assert all(o.accepted for o in outcomes) and len(mempool) == 3
        assert mempool.admissions([bytes(m.hash) for m in msgs]) != [None, None, None]

        out = await orderer.produce()
        reasons = [d.error.reason.value for d in out.dropped]
        assert len(reasons) == 3 and not out.applied and not len(mempool)
        m = scrape(port)
    finally:
        endpoint.stop()
        verifier.close()
        pipeline.close()
        h.chain.close()

    dropped = {labels["chain_reason_code"]: v for labels, v in m["chain_messages_dropped_total"]}
    assert dropped == {reason: float(reasons.count(reason)) for reason in set(reasons)}
    assert [v for _, v in m["chain_blocks_committed_total"]] == [1.0]
    assert [v for _, v in m["chain_messages_committed_total"]] == [0.0]
    assert [v for _, v in m["chain_block_messages_count"]] == [1.0]
    assert [v for _, v in m["chain_block_messages_sum"]] == [0.0]
    assert sum(v for _, v in m.get("chain_message_commit_duration_seconds_count", [])) == 0  # none committed
    accepted = [v for labels, v in m["chain_messages_submitted_total"] if labels["chain_outcome"] == "accepted"]
    assert accepted == [3.0]
