"""What a client is told about a write through a follower, over 3 members and etcd: OUTCOME_UNKNOWN (never
NOT_LEADER) when the follower forwarded to a leader that froze, NOT_LEADER only when nothing was sent, and a
message admitted and then dropped says why on the member the client talks to (MESSAGE_DROPPED)."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import grpc
import pytest

from chain.v1 import message_pb2 as pb
from node.sdk.calls import Committed
from node.sdk.errors import ChainError, Dropped, NotFound, OutcomeUnknown
from node.sdk.rpc import ChainClient, reason_of
from tests.fixtures.actors import RemoteActor
from tests.fixtures.etcdproc import EtcdCluster
from tests.fixtures.replicaset import ReplicaSet, funded_actors, leader_index, status

# a lease longer than a forward takes to be sent: the followers' writes reach the frozen leader before any
# member sees its lease lapse (the forward's own timeout, 5 s, decides the answer), and a killed leader is
# still named for a few one-second connection attempts (its lease lapses up to a TTL after its last renewal)
LEASE = ("--lease-ttl", "6")


@dataclass
class Cluster:
    nodes: ReplicaSet
    actor: RemoteActor


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    work = tmp_path_factory.mktemp("honest")
    etcd = EtcdCluster(work / "etcd", 1).start()
    nodes = ReplicaSet(work, etcd, *LEASE)
    try:
        nodes.start(3)
        lead = leader_index(nodes)
        with nodes.nodes[(lead + 1) % 3].client(timeout=30) as c:
            actor = funded_actors(c, nodes.authority(), 1, units=2)[0]
        yield Cluster(nodes, actor)
    finally:
        for n in nodes.nodes:  # a test that failed with a member frozen: let it stop
            if n.proc is not None and n.proc.poll() is None:
                n.proc.send_signal(signal.SIGCONT)
        nodes.stop()
        etcd.stop()


def connect_followers(nodes: ReplicaSet, lead: int, actor: RemoteActor) -> None:
    """A write through each follower: each has its connection to the leader open (a forward goes out)."""
    for i in range(3):
        if i != lead:
            with nodes.nodes[i].client(timeout=30) as c:
                c.commit(actor.b.follow(bytes([i + 1]) * 20))


def submit(c: ChainClient, msg: pb.Message) -> ChainError | None:
    try:
        c.submit(msg)
    except ChainError as err:
        return err
    return None


def resolve(c: ChainClient, msg: pb.Message) -> int | Dropped:
    """What became of `msg`, as the member `c` talks to says: its block, or why it was dropped."""
    try:
        return int(c.wait_committed(bytes(msg.hash), timeout=40).block_number)
    except Dropped as err:
        return err


def test_a_frozen_leader_gets_outcome_unknown_and_the_write_that_lost_says_why(cluster: Cluster) -> None:
    """Two followers each forward a project of the same name to the leader, which is frozen (SIGSTOP): each
    answers OUTCOME_UNKNOWN with the hash (never NOT_LEADER: what they sent may commit), unless it took the lead
    and committed the message itself before answering, which it then answers as accepted. A new leader is
    elected, commits the one it holds and is re-forwarded the other, which it refuses (NAME_TAKEN); the
    member that held it records the drop, and GetMessage there says why and at which block. Without the
    gate (a failed forward answered NOT_LEADER) the first assertion fails; without the record of a refused
    re-forward, the loser's GetMessage is a bare NOT_FOUND until the wait runs out. A third write through
    `commit()` meanwhile is looked up instead of failing, and returns its height."""
    nodes, actor = cluster.nodes, cluster.actor
    lead = leader_index(nodes)
    followers = [i for i in range(3) if i != lead]
    connect_followers(nodes, lead, actor)
    msgs = {i: actor.b.project_create("raced", f"sent through n{i}") for i in followers}
    clients = {i: nodes.nodes[i].client(timeout=30) for i in followers}
    answers: dict[int, ChainError | None] = {}
    third = actor.b.follow(b"\x07" * 20)  # through commit(), which looks an unknown outcome up itself
    committed: list[Committed | Exception] = []

    def commit_third() -> None:
        with nodes.nodes[followers[0]].client(timeout=30) as c:
            try:
                committed.append(c.commit(third, timeout=40))
            except Exception as err:  # reported by the assertion below
                committed.append(err)

    before = {i: int(status(nodes.nodes[i]).block_height) for i in followers}  # the heights before the race
    frozen = nodes.nodes[lead].proc
    assert frozen is not None
    frozen.send_signal(signal.SIGSTOP)  # not NodeProcess.signal: the stop at the end still sends SIGTERM
    try:
        threads = [
            threading.Thread(target=lambda i=i: answers.__setitem__(i, submit(clients[i], msgs[i]))) for i in followers
        ]
        threads.append(threading.Thread(target=commit_third))
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        unknown = 0
        for i in followers:
            err = answers[i]
            if err is None:  # this member took the lead and committed it before answering: the outcome is known
                continue
            assert isinstance(err, OutcomeUnknown), (i, err)  # not NOT_LEADER: it was sent
            assert reason_of(err) == "OUTCOME_UNKNOWN" and err.code() == grpc.StatusCode.DEADLINE_EXCEEDED
            assert err.hashes == [bytes(msgs[i].hash)] and not err.retryable
            unknown += 1
        assert unknown >= 1, answers  # the one that loses is never committed where it was sent
        outcomes = {i: resolve(clients[i], msgs[i]) for i in followers}
    finally:
        frozen.send_signal(signal.SIGCONT)
        for c in clients.values():
            c.close()
    (third_outcome,) = committed
    assert isinstance(third_outcome, Committed), third_outcome
    assert third_outcome[0].message.hash == third.hash and third_outcome.height == third_outcome[0].block_number
    won = [i for i, o in outcomes.items() if isinstance(o, int)]
    lost = [o for o in outcomes.values() if isinstance(o, Dropped)]
    assert len(won) == 1 and len(lost) == 1, outcomes
    dropped = lost[0]
    assert dropped.reason == "NAME_TAKEN" and "refused when forwarded again" in dropped.details()
    # the height is the recording member's applied height when the leader refused the re-forward
    (loser,) = [i for i in followers if i not in won]
    assert dropped.height is not None and before[loser] <= dropped.height <= int(
        status(nodes.nodes[loser]).block_height
    )
    leader_index(nodes, timeout=60)  # the thawed member follows the new leader


def test_not_leader_only_when_nothing_was_sent(cluster: Cluster) -> None:
    """The leader is killed: until its lease lapses a follower still names it, cannot connect, sends
    nothing and answers NOT_LEADER; the message was withdrawn (sent again later, it is taken as new, not as
    one already pending) and commits once a leader is elected. Without the connection check the refused
    connection is answered OUTCOME_UNKNOWN. (A forward that goes out before the follower's channel has seen
    the connection close is OUTCOME_UNKNOWN, rightly: it was sent. The next one is not.)"""
    nodes, actor = cluster.nodes, cluster.actor
    lead = leader_index(nodes)
    follower = (lead + 1) % 3
    connect_followers(nodes, lead, actor)
    with nodes.nodes[follower].client(timeout=30) as c:
        nodes.kill(lead)
        for attempt in range(3):
            msg = actor.b.follow(bytes([0x10 + attempt]) * 20)
            err = submit(c, msg)
            assert err is not None and reason_of(err) in ("NOT_LEADER", "OUTCOME_UNKNOWN"), err
            if reason_of(err) == "NOT_LEADER":
                break
        assert err is not None and reason_of(err) == "NOT_LEADER", err
        assert "cannot be reached" in err.details() and err.retry_after is not None
        with pytest.raises(NotFound):
            c.get_message(hash=bytes(msg.hash))
        deadline = time.monotonic() + 40
        while True:  # a new leader: the same message is new to this member (withdrawn), and commits
            again = submit(c, msg)
            if again is None:
                break
            assert reason_of(again) == "NOT_LEADER", again
            assert time.monotonic() < deadline, "no leader was elected"
            time.sleep(0.2)
        c.wait_committed(bytes(msg.hash), timeout=30)
