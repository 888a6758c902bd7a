"""Read consistency in the SDK (docs/sdk.md, "Read consistency") against a real node: every typed read keeps
the height its answer reflects (`last_height`); reads carry the client's session height (its last commit) by
default, `min_height=` and `consistency=` per call; the sync and async clients alike."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from node.sdk.aio import AsyncChainClient
from node.sdk.errors import Unavailable
from node.sdk.rpc import ChainClient
from tests.fixtures.actors import RemoteActor, new_account
from tests.fixtures.nodeproc import NodeProcess


@pytest.fixture(scope="module")
def solo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    node = NodeProcess(Path(tmp_path_factory.mktemp("sdk-consistency")) / "data").start(timeout=120)
    yield node
    node.stop()


@pytest.fixture(scope="module")
def actor(solo: NodeProcess) -> RemoteActor:
    with solo.client() as c:
        return new_account(c, solo.authority())


def test_a_commit_moves_the_session_and_reads_follow_it(solo: NodeProcess, actor: RemoteActor) -> None:
    with ChainClient(solo.grpc_target) as c:
        committed = c.commit(actor.b.follow(b"\x01" * 20))
        assert c.session_height >= committed[0].block_number
        account = c.get_account(owner_address=actor.address)
        assert account.account.owner_address == actor.address
        assert c.last_height >= c.session_height  # the answer reflects the write
        c.get_chain_stats(consistency="linearizable")
        assert c.last_height >= c.session_height


def test_a_session_height_the_node_has_not_reached_is_refused_after_the_timeout(
    solo: NodeProcess, actor: RemoteActor
) -> None:
    """A session height beyond the node's (as when the client's next read reaches a node behind its write)."""
    with ChainClient(solo.grpc_target, timeout=2.0) as c:
        c.get_account(owner_address=actor.address)
        c.session_height = c.last_height + 10_000
        with pytest.raises(Unavailable) as refused:
            c.get_account(owner_address=actor.address)
        assert refused.value.reason == "HEIGHT_NOT_REACHED"
        assert refused.value.retry_after is not None
    with ChainClient(solo.grpc_target, timeout=2.0, session=False) as c:
        c.session_height = 10**9
        assert c.get_account(owner_address=actor.address).account.owner_address == actor.address


def test_min_height_per_call(solo: NodeProcess, actor: RemoteActor) -> None:
    with ChainClient(solo.grpc_target, timeout=2.0) as c:
        c.get_chain_stats()
        with pytest.raises(Unavailable) as refused:
            c.get_chain_stats(min_height=c.last_height + 10_000)
        assert refused.value.reason == "HEIGHT_NOT_REACHED"
        assert list(c.iter_blocks(min_height=1))  # the iterators pass it on to every page


def test_the_async_client_alike(solo: NodeProcess, actor: RemoteActor) -> None:
    async def run() -> None:
        async with AsyncChainClient(solo.grpc_target, timeout=2.0) as c:
            committed = await c.commit(actor.b.follow(b"\x02" * 20))
            assert c.session_height >= committed[0].block_number
            await c.get_account(owner_address=actor.address, consistency="linearizable")
            assert c.last_height >= c.session_height
            with pytest.raises(Unavailable) as refused:
                await c.get_account(owner_address=actor.address, min_height=c.last_height + 10_000)
            assert refused.value.reason == "HEIGHT_NOT_REACHED"

    asyncio.run(run())
