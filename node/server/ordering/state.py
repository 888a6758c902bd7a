"""A member's state: one value, with its reason, that health, leadership fitness and admissions all read.

    status = orderer.member_status           # MemberStatus(MemberState.HALTED, "block 12 ...")
    status.state.serving                     # readiness (with the store's own health: storage_health.py)
    status.state.fit_to_lead                 # the election's `unfit` (election.py)
    status.refusal(admits=..., storage=...)  # why a submission is refused here (None: admit or forward)
    wait = wait_after(exc, pacing)           # how long a round that raised `exc` waits, and the state it sets

The states, strongest first: a member in two at once is in the first.

- HALTED: a block's state root differs from this member's. Final: writes get STATE_DIVERGED, it does not lead,
  readiness is NOT_SERVING; reads keep working.
- LEAVING: the log was compacted past it. Final: writes get DRAINING, it does not lead, and it drains and
  restarts to state-sync from a member's snapshot (etcd/join.py).
- STORE_BACKING_OFF: its store refused a commit and the next attempt is not due: writes get STORAGE_FAILED
  (where it would admit them), it does not lead, NOT_SERVING.
- STORE_RETRYING: the same once the next attempt is due: it may lead again to make that attempt.
- LOG_FULL: etcd refuses this member's appends (its NOSPACE alarm): as leader it refuses writes with
  STORAGE_FAILED; serving. Set by the refused append, cleared when the log moves.
- CATCHING_UP: more than max_lag_blocks behind the log (or the upstream), or the log not read yet: NOT_SERVING.
- SERVING.

HALTED, LEAVING and LOG_FULL are set by events and held by the orderer (`after` moves them on); the store's
and the lag's states are read from the store's health and the heights each time (`current`).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from types import MappingProxyType

import grpc

from node.errors import InvalidBlock, MessageRejected, Reason, StorageFailed
from node.server.ordering.etcd.client import EtcdFull, EtcdUnavailable
from node.server.storage_health import StorageHealth

LOG_FULL_RETRY = 1.0  # seconds between appends while etcd refuses them (its NOSPACE alarm)
FAILED_ROUND_WAIT = 0.5  # seconds after a round failed in a way the loop does not know


class MemberState(enum.Enum):
    HALTED = "halted"
    LEAVING = "leaving"
    STORE_BACKING_OFF = "store_backing_off"
    STORE_RETRYING = "store_retrying"
    LOG_FULL = "log_full"
    CATCHING_UP = "catching_up"
    SERVING = "serving"

    @property
    def final(self) -> bool:
        """Only a restart leaves it."""
        return self in (MemberState.HALTED, MemberState.LEAVING)

    @property
    def serving(self) -> bool:
        """Readiness: SERVING, or serving reads and forwarding writes while etcd refuses appends."""
        return self in (MemberState.SERVING, MemberState.LOG_FULL)

    @property
    def fit_to_lead(self) -> bool:
        return self not in (MemberState.HALTED, MemberState.LEAVING, MemberState.STORE_BACKING_OFF)

    @property
    def store_failing(self) -> bool:
        return self in (MemberState.STORE_BACKING_OFF, MemberState.STORE_RETRYING)


@dataclass(frozen=True)
class MemberStatus:
    state: MemberState
    reason: str = ""  # why ("" while SERVING)

    def unfit(self) -> str:
        """Why this member must not lead ("" when it may), in the election's log line."""
        if self.state.fit_to_lead:
            return ""
        return f"{UNFIT[self.state]}: {self.reason}"

    def refusal(self, *, admits: bool, storage: StorageHealth) -> MessageRejected | None:
        """Why a submission is refused in this state (None: go on). `admits`: this member would admit it
        itself (it leads; or, for a store failure, no leader is known) rather than forward it."""
        if self.state is MemberState.HALTED:
            return MessageRejected(Reason.STATE_DIVERGED, f"this node stopped taking writes: {self.reason}")
        if self.state is MemberState.LEAVING:
            return MessageRejected(Reason.DRAINING, f"this node restarts to catch up: {self.reason}")
        if admits and self.state.store_failing:
            return storage.refusal()
        return None


SERVING = MemberStatus(MemberState.SERVING)
UNFIT = MappingProxyType(
    {
        MemberState.HALTED: "it stopped taking writes",
        MemberState.LEAVING: "it restarts to catch up",
        MemberState.STORE_BACKING_OFF: "its store cannot commit blocks",
    }
)


def after(held: MemberStatus, event: MemberStatus) -> MemberStatus:
    """The held state once `event` happened: a final state stays; anything else is replaced (SERVING clears)."""
    return held if held.state.final else event


def current(held: MemberStatus, storage: StorageHealth, behind: str) -> MemberStatus:
    """The member's state now: `held` (HALTED, LEAVING, LOG_FULL or SERVING), the store's, and `behind`
    (why it is too far behind to serve; "" when it is not), strongest first."""
    if held.state.final:
        return held
    if storage.failure:
        state = MemberState.STORE_BACKING_OFF if storage.backing_off else MemberState.STORE_RETRYING
        return MemberStatus(state, storage.failure)
    if held.state is MemberState.LOG_FULL:
        return held
    if behind:
        return MemberStatus(MemberState.CATCHING_UP, behind)
    return SERVING


@dataclass(frozen=True)
class Pacing:
    """What a loop's waits are made of: `base`, its wait after a good round; `poll`, how soon it reads again
    while the other side is unreachable; `store_retry`, seconds until the store's next attempt."""

    base: float
    poll: float
    store_retry: float


class Say(enum.Enum):
    """What the loop logs about a failed round."""

    NOTHING = "nothing"  # said elsewhere (StorageHealth, the state change) or not worth a line
    UNREACHABLE = "unreachable"  # etcd or the upstream did not answer: a line every few seconds at most
    TRACEBACK = "traceback"  # an exception the loop does not know: logged with its traceback


@dataclass(frozen=True)
class Wait:
    seconds: float
    backoff: bool = False  # wait it out even if woken meanwhile (the log moved)
    status: MemberStatus | None = None  # the state the failure puts the member in (None: unchanged)
    say: Say = Say.NOTHING
    reconsider: bool = False  # its fitness to lead may have changed: the election asks again now


def wait_after(exc: Exception, pacing: Pacing) -> Wait:
    """How a round that raised `exc` waits, and the state it leaves the member in: the one place that decides."""
    if isinstance(exc, EtcdFull):  # the append is tried again once a second (an empty block is due anyway)
        status = MemberStatus(MemberState.LOG_FULL, str(exc))
        return Wait(max(pacing.base, LOG_FULL_RETRY), backoff=True, status=status)
    if isinstance(exc, EtcdUnavailable | grpc.aio.AioRpcError):
        return Wait(min(pacing.base, pacing.poll), say=Say.UNREACHABLE)
    if isinstance(exc, InvalidBlock):
        why = f"STATE DIVERGED: block {exc.number} does not match this node's state: {exc}"
        return Wait(pacing.base, status=MemberStatus(MemberState.HALTED, why), reconsider=True)
    if isinstance(exc, StorageFailed):  # logged once by StorageHealth; the block is retried after its backoff
        return Wait(max(pacing.base, pacing.store_retry), backoff=True, reconsider=True)
    return Wait(max(pacing.base, FAILED_ROUND_WAIT), backoff=True, say=Say.TRACEBACK)
