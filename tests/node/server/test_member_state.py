"""The member state (node/server/ordering/state.py) on a clock the test moves: which state wins, which
transitions hold, what each state refuses, and how long a round that raised waits."""

from __future__ import annotations

import grpc
import pytest

from node.errors import InvalidBlock, Reason, StorageFailed
from node.server.ordering.etcd.client import EtcdFull, EtcdUnavailable
from node.server.ordering.state import (
    FAILED_ROUND_WAIT,
    LOG_FULL_RETRY,
    SERVING,
    MemberState,
    MemberStatus,
    Pacing,
    Say,
    Wait,
    after,
    current,
    wait_after,
)
from node.server.storage_health import StorageHealth

HALTED = MemberStatus(MemberState.HALTED, "block 7 diverged")
LEAVING = MemberStatus(MemberState.LEAVING, "the log starts at block 40")
LOG_FULL = MemberStatus(MemberState.LOG_FULL, "NOSPACE")


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def failing_store(clock: Clock) -> StorageHealth:
    storage = StorageHealth(base=1.0, cap=4.0, clock=clock)
    storage.failed(StorageFailed("disk full"))  # the next attempt is 1 s away
    return storage


def test_the_strongest_state_wins_and_the_store_backs_off_only_until_its_attempt_is_due() -> None:
    clock = Clock()
    healthy, failing = StorageHealth(clock=clock), failing_store(clock)
    assert current(SERVING, healthy, "") == SERVING
    assert current(SERVING, healthy, "12 blocks behind") == MemberStatus(MemberState.CATCHING_UP, "12 blocks behind")
    assert current(LOG_FULL, healthy, "12 blocks behind") == LOG_FULL
    assert current(LOG_FULL, failing, "") == MemberStatus(MemberState.STORE_BACKING_OFF, "disk full")
    assert current(HALTED, failing, "behind") == HALTED and current(LEAVING, failing, "behind") == LEAVING
    clock.now += 1.0  # the next attempt is due: still failing, but free to lead to make it
    assert current(SERVING, failing, "") == MemberStatus(MemberState.STORE_RETRYING, "disk full")
    failing.succeeded()
    assert current(SERVING, failing, "") == SERVING


def test_halted_and_leaving_are_final_and_log_full_clears() -> None:
    assert after(SERVING, LOG_FULL) == LOG_FULL and after(LOG_FULL, SERVING) == SERVING
    assert after(LOG_FULL, HALTED) == HALTED
    for final in (HALTED, LEAVING):
        for event in (SERVING, LOG_FULL, HALTED, LEAVING):
            assert after(final, event) == final  # the first reason stays


def test_what_each_state_means_for_health_and_leadership() -> None:
    serving = {s for s in MemberState if s.serving}
    fit = {s for s in MemberState if s.fit_to_lead}
    assert serving == {MemberState.SERVING, MemberState.LOG_FULL}
    assert fit == {MemberState.SERVING, MemberState.LOG_FULL, MemberState.CATCHING_UP, MemberState.STORE_RETRYING}
    assert HALTED.unfit() == "it stopped taking writes: block 7 diverged"
    assert LEAVING.unfit() == "it restarts to catch up: the log starts at block 40"
    assert (
        MemberStatus(MemberState.STORE_BACKING_OFF, "disk full").unfit() == "its store cannot commit blocks: disk full"
    )
    assert all(not MemberStatus(s).unfit() for s in fit)


@pytest.mark.parametrize("admits", [True, False])
def test_the_refusals_stay_the_reason_codes_clients_know(admits: bool) -> None:
    clock = Clock()
    healthy, failing = StorageHealth(clock=clock), failing_store(clock)
    halted = HALTED.refusal(admits=admits, storage=failing)
    assert halted is not None and halted.reason == Reason.STATE_DIVERGED and "block 7 diverged" in str(halted)
    leaving = LEAVING.refusal(admits=admits, storage=failing)
    assert leaving is not None and leaving.reason == Reason.DRAINING
    store = current(SERVING, failing, "").refusal(admits=admits, storage=failing)
    if admits:  # where this member would admit, a failing store refuses, with the store's retry hint
        assert store is not None and store.reason == Reason.STORAGE_FAILED and store.values["retry_after_ms"] >= 500
    else:  # forwarded: the leader decides
        assert store is None
    for state in (MemberState.SERVING, MemberState.CATCHING_UP, MemberState.LOG_FULL):
        assert MemberStatus(state).refusal(admits=admits, storage=healthy) is None


def test_one_place_decides_the_wait_after_a_failed_round() -> None:
    pacing = Pacing(base=0.2, poll=0.05, store_retry=3.0)
    full = wait_after(EtcdFull("NOSPACE alarm"), pacing)
    assert full == Wait(LOG_FULL_RETRY, backoff=True, status=MemberStatus(MemberState.LOG_FULL, "NOSPACE alarm"))
    assert wait_after(EtcdUnavailable("no quorum"), pacing) == Wait(0.05, say=Say.UNREACHABLE)
    rpc_error = grpc.aio.AioRpcError(
        grpc.StatusCode.UNAVAILABLE, grpc.aio.Metadata(), grpc.aio.Metadata(), "down", None
    )
    assert wait_after(rpc_error, pacing) == Wait(0.05, say=Say.UNREACHABLE)
    diverged = wait_after(InvalidBlock(7, "state_root", "aa", "bb"), pacing)
    assert diverged.seconds == 0.2 and not diverged.backoff and diverged.reconsider
    assert diverged.status is not None and diverged.status.state is MemberState.HALTED
    assert "STATE DIVERGED" in diverged.status.reason and "block 7" in diverged.status.reason
    assert wait_after(StorageFailed("disk full"), pacing) == Wait(3.0, backoff=True, reconsider=True)
    assert wait_after(RuntimeError("bug"), pacing) == Wait(FAILED_ROUND_WAIT, backoff=True, say=Say.TRACEBACK)
    slow = Pacing(base=5.0, poll=0.05, store_retry=0.5)  # never shorter than the wait after a good round
    assert wait_after(EtcdFull("x"), slow).seconds == 5.0 and wait_after(StorageFailed("x"), slow).seconds == 5.0
