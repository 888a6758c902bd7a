"""The orderers' admissions and leadership fitness read the member state: a halted member refuses writes with
STATE_DIVERGED, a leaving one with DRAINING, one whose store fails with STORAGE_FAILED where it would admit
them, and none of them leads. In-process members, never started (no etcd, no upstream is reached)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from chain.v1 import message_pb2 as pb
from node.chain import Chain
from node.errors import InvalidBlock, MessageRejected, Reason, StorageFailed
from node.observability.logs import Every
from node.params import ChainParams
from node.server.events import EventHub
from node.server.ordering.applier import BlockApplier
from node.server.ordering.etcd.client import EtcdClient, EtcdFull
from node.server.ordering.etcd.election import Election
from node.server.ordering.etcd.log import Keys
from node.server.ordering.etcd.replicated import ReplicatedOrderer, ReplicationSettings
from node.server.ordering.follower import FollowOrderer
from node.server.ordering.state import MemberState, Pacing, wait_after
from node.server.write.forwarding import Forwarder
from node.server.write.mempool import Mempool
from node.server.write.pipeline import Pipeline
from node.server.write.verify import Verifier
from tests.fixtures.orderer import etcd_member

KEYS = Keys(b"/gates/")
PARAMS = ChainParams(genesis_time_ms=1_800_000_000_000)
NOWHERE = "127.0.0.1:1"  # nothing listens: these members are never started
PACING = Pacing(base=0.05, poll=0.05, store_retry=0.25)
DIVERGED = InvalidBlock(3, "state_root", "aa", "bb")


@asynccontextmanager
async def member(tmp_path: Path) -> AsyncIterator[tuple[ReplicatedOrderer, list[str]]]:
    """A member with an election that never ran (no leader known); the reasons it was asked to leave."""
    client = EtcdClient([f"http://{NOWHERE}"])
    left: list[str] = []
    settings = ReplicationSettings(node_id="m0")
    async with etcd_member(tmp_path, client, KEYS, PARAMS, settings) as (orderer, _chain):
        orderer.on_leave = left.append
        orderer.election = Election(client, KEYS, "m0", orderer.addr, ttl=3, poll=0.5, unfit=orderer._unfit)
        yield orderer, left


def state_of(orderer: ReplicatedOrderer | FollowOrderer) -> MemberState:
    return orderer.member_status.state


async def refusal(orderer: ReplicatedOrderer | FollowOrderer) -> Reason:
    with pytest.raises(MessageRejected) as info:
        await orderer.submit([pb.Message()])
    return info.value.reason


async def test_a_halted_member_refuses_writes_and_does_not_lead(tmp_path: Path) -> None:
    async with member(tmp_path) as (orderer, left):
        assert await refusal(orderer) == Reason.NOT_LEADER  # healthy, no leader known
        assert not orderer.serving and state_of(orderer) is MemberState.CATCHING_UP  # the log unread
        orderer._failed(DIVERGED, wait_after(DIVERGED, PACING), Every(5))
        assert state_of(orderer) is MemberState.HALTED and not orderer.serving
        assert await refusal(orderer) == Reason.STATE_DIVERGED
        assert orderer._unfit().startswith("it stopped taking writes: STATE DIVERGED")
        orderer._leave("the log starts past this node")  # final: it stays halted and is not asked to leave
        assert state_of(orderer) is MemberState.HALTED and left == []


async def test_a_member_the_log_left_behind_drains_and_does_not_lead(tmp_path: Path) -> None:
    async with member(tmp_path) as (orderer, left):
        orderer._leave("the log starts at block 40 but this node is at 3")
        assert left == ["the log starts at block 40 but this node is at 3"]
        assert await refusal(orderer) == Reason.DRAINING
        assert orderer._unfit().startswith("it restarts to catch up") and not orderer.serving


async def test_a_failing_store_refuses_writes_where_the_member_would_admit_them(tmp_path: Path) -> None:
    async with member(tmp_path) as (orderer, _left):
        storage = orderer.applier.storage
        wait = wait_after(StorageFailed("disk full"), PACING)
        storage.failed(StorageFailed("disk full"))
        orderer._failed(StorageFailed("disk full"), wait, Every(5))
        assert wait.backoff and wait.seconds >= PACING.store_retry
        assert await refusal(orderer) == Reason.STORAGE_FAILED  # no leader: it cannot lead either, so say why
        assert orderer._unfit() == "its store cannot commit blocks: disk full"
        storage.succeeded()
        assert await refusal(orderer) == Reason.NOT_LEADER and orderer._unfit() == ""


async def test_a_full_log_is_held_until_the_log_moves(tmp_path: Path) -> None:
    async with member(tmp_path) as (orderer, _left):
        full = EtcdFull("etcd's database is full (NOSPACE alarm)")
        orderer._failed(full, wait_after(full, PACING), Every(5))
        assert state_of(orderer) is MemberState.LOG_FULL and orderer._unfit() == ""
        orderer._applied(1)  # another member appended: etcd takes appends again
        assert state_of(orderer) is not MemberState.LOG_FULL


async def test_a_diverged_replica_refuses_writes(tmp_path: Path) -> None:
    chain = Chain.open(tmp_path / "chain", PARAMS)
    verifier = Verifier(0, 262144)
    mempool = Mempool(100)
    pipeline = Pipeline(chain, mempool, verifier)
    forwarder = Forwarder(pipeline, mempool, max_batch=100)
    replica = FollowOrderer(
        chain, BlockApplier(chain, mempool, pipeline, EventHub(100)), forwarder, NOWHERE, max_lag_blocks=5
    )
    try:
        assert not replica.serving  # the upstream's height is not known yet
        replica._failed(DIVERGED, wait_after(DIVERGED, PACING), Every(5))
        assert state_of(replica) is MemberState.HALTED
        assert await refusal(replica) == Reason.STATE_DIVERGED
    finally:
        await forwarder.close()
        pipeline.close()
        chain.close()
        verifier.close()
