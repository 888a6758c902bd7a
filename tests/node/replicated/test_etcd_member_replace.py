"""Replacing an etcd member, as docs/operations.md "Replace an etcd member" says, on a real 3-member etcd
while replicated chain-nodes keep ordering blocks through it.

The runbook's etcdctl commands run as written (the real `etcdctl` binary): the lost member (process gone,
data dir wiped) is removed first, then added back under its name and peer URL, then started on an empty
data dir with `--initial-cluster-state existing` and the cluster `member add` printed (started with `new`
instead it exits: the runbook's failure line). The chain commits at every step. At the end a different
original member is stopped: commits continue only if the new member really holds its share of the quorum
(two of three).
"""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

from tests.fixtures.actors import RemoteActor
from tests.fixtures.etcdproc import EtcdCluster
from tests.fixtures.replicaset import ReplicaSet, assert_same_chain, commit_retrying, funded_actors, status, wait_height

ETCDCTL = shutil.which("etcdctl") or "/usr/bin/etcdctl"


def etcdctl(endpoints: list[str], *args: str, retry_unhealthy: float = 0.0) -> str:
    """Run etcdctl; with `retry_unhealthy`, run it again for that many seconds while etcd answers
    `unhealthy cluster` (what `member add` answers for a few seconds after a `member remove`)."""
    deadline = time.monotonic() + retry_unhealthy
    while True:
        done = subprocess.run(
            [ETCDCTL, "--endpoints", ",".join(endpoints), "--command-timeout", "10s", *args],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        if done.returncode == 0 or "unhealthy cluster" not in done.stderr or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert done.returncode == 0, done.stderr
    return done.stdout


def members(endpoints: list[str]) -> dict[str, tuple[str, str]]:
    """name -> (hex member id, status) from `etcdctl member list` (an unstarted member has no name yet:
    it is listed under its peer URL)."""
    out: dict[str, tuple[str, str]] = {}
    for line in etcdctl(endpoints, "member", "list").splitlines():
        member_id, state, name, peer, *_ = [f.strip() for f in line.split(",")]
        out[name or peer] = (member_id, state)
    return out


def added_cluster(output: str) -> str:
    """ETCD_INITIAL_CLUSTER from what `etcdctl member add` prints for the new member's configuration."""
    for line in output.splitlines():
        if line.startswith("ETCD_INITIAL_CLUSTER="):
            return line.split("=", 1)[1].strip('"')
    raise AssertionError(f"no ETCD_INITIAL_CLUSTER in {output!r}")


def commits(nodes: ReplicaSet, actor: RemoteActor, name: str) -> None:
    """A write submitted to a follower-or-leader commits (the chain orders through etcd right now)."""
    with nodes.nodes[1].client(timeout=10) as c:
        commit_retrying(c, actor.b.project_create(name))


def test_replace_an_etcd_member_while_the_chain_keeps_ordering(tmp_path: Path, etcd3: EtcdCluster) -> None:
    nodes = ReplicaSet(tmp_path, etcd3).start(2)
    try:
        with nodes.nodes[0].client(timeout=10) as c:
            actor = funded_actors(c, nodes.authority(), 1)[0]
        commits(nodes, actor, "before")
        lost = etcd3.members[2]
        survivors = etcd3.endpoints[:2]

        # The member's volume is gone: its process stops and its data dir is wiped.
        lost.kill()
        shutil.rmtree(lost.data_dir)
        commits(nodes, actor, "one-member-down")

        # 1. remove it (first: adding before removing would make 4 members with 2 down, no quorum)
        member_id, _ = members(survivors)[lost.name]
        etcdctl(survivors, "member", "remove", member_id)
        assert lost.name not in members(survivors)
        commits(nodes, actor, "removed")

        # 2. add it back under the same name and peer URL (a new member id)
        added = etcdctl(survivors, "member", "add", lost.name, f"--peer-urls={lost.peer_url}", retry_unhealthy=30)
        listed = members(survivors)
        assert listed[lost.peer_url][1] == "unstarted"
        assert listed[lost.peer_url][0] != member_id
        commits(nodes, actor, "added")

        # Started as a member of a new cluster instead (etcd.initialClusterState=new): it takes the removed
        # member's identity and exits. Its data dir is wiped again.
        lost.start(etcd3.initial_cluster, state="new")
        assert lost.proc is not None
        lost.proc.wait(60)
        assert "the member has been permanently removed from the cluster" in lost.log.read_text()
        shutil.rmtree(lost.data_dir)
        commits(nodes, actor, "wrong-start")

        # 3. start it on an empty data dir, joining the existing cluster
        lost.start(added_cluster(added), state="existing")
        etcd3.wait_healthy(members=[2])
        assert members(etcd3.endpoints)[lost.name][1] == "started"
        commits(nodes, actor, "rejoined")

        # 4. the new member holds the keyspace and its share of the quorum: stop an original member
        etcd3.kill(0)
        commits(nodes, actor, "original-member-down")
        # its own copy (a serializable read answers from the member's local store): the chain's keys are there
        keys = etcdctl([lost.client_url], "get", "", "--prefix", "--keys-only", "--consistency", "s")
        assert len(keys.split()) > 2, keys

        height = max(status(n).block_height for n in nodes.nodes)
        wait_height(nodes.nodes, height)
        assert_same_chain(nodes.nodes, height)
    finally:
        nodes.stop()
