"""State sync with real etcd and real members: new, wiped and stale members join after the log was compacted
past them; the compaction bound keeps the log continuing every served snapshot."""

from __future__ import annotations

import asyncio
import shutil
import signal
import time
from pathlib import Path

from node.errors import RESTART_EXIT_STATUS
from node.server.ordering.etcd.client import EtcdClient
from node.server.ordering.etcd.log import Keys
from node.server.snapshots.verify import store_height
from tests.fixtures.etcdproc import EtcdCluster
from tests.fixtures.nodeproc import NodeProcess
from tests.fixtures.replicaset import ReplicaSet, assert_same_chain, leader_index, status, wait_height
from tests.fixtures.statesync import COMPACT, advance, fill, read_tail, snapshot, wait_compacted


def converge(nodes: ReplicaSet) -> None:
    height = advance(nodes, 2)
    wait_height(nodes.alive(), height)
    assert_same_chain(nodes.alive(), height)


def test_empty_member_joins_after_the_log_was_compacted_below_a_snapshot(tmp_path: Path, etcd1: EtcdCluster) -> None:
    nodes = ReplicaSet(tmp_path, etcd1, *COMPACT, block_interval=0.1).start(3)
    try:
        fill(nodes.nodes[0], 200)
        snap = snapshot(nodes.nodes[0])  # n0 alone holds a snapshot, on its own volume
        advance(nodes, 15)  # every member is well past it: only the served snapshot bounds compaction
        tail = wait_compacted(etcd1, snap.block_number)
        assert tail.first == snap.block_number  # the gate: never above the snapshot n0 serves
        newcomer = nodes.add(data_dir=tmp_path / "empty")
        assert any(f"state-synced block {snap.block_number} from n0" in line for line in newcomer.stderr_lines)
        assert status(newcomer).block_height >= snap.block_number
        converge(nodes)
    finally:
        nodes.stop()


def test_compaction_keeps_the_oldest_served_snapshot(tmp_path: Path, etcd1: EtcdCluster) -> None:
    nodes = ReplicaSet(tmp_path, etcd1, *COMPACT, block_interval=0.1).start(3)
    try:
        older = snapshot(nodes.nodes[1])
        advance(nodes, 5)
        newer = snapshot(nodes.nodes[2])
        advance(nodes, 10)
        assert wait_compacted(etcd1, older.block_number).first == older.block_number
        nodes.kill(2)  # the newer snapshot's member is gone (its lease, and its snapshot key, expire)
        wiped = tmp_path / "n2"
        shutil.rmtree(wiped)
        rejoined = nodes.restart(2)  # only n1's older snapshot is left to sync from, and the log continues it
        assert any(f"state-synced block {older.block_number} from n1" in line for line in rejoined.stderr_lines)
        assert newer.block_number > older.block_number
        converge(nodes)
    finally:
        nodes.stop()


def test_wiped_member_rejoins(tmp_path: Path, etcd1: EtcdCluster) -> None:
    nodes = ReplicaSet(tmp_path, etcd1, *COMPACT, block_interval=0.1).start(3)
    try:
        fill(nodes.nodes[0], 100)
        snap = snapshot(nodes.nodes[0])
        advance(nodes, 5)
        wait_compacted(etcd1, snap.block_number)
        nodes.kill(2)
        shutil.rmtree(tmp_path / "n2")  # a lost volume
        rejoined = nodes.restart(2)
        assert any("state-synced block" in line for line in rejoined.stderr_lines)
        converge(nodes)
    finally:
        nodes.stop()


def test_stale_member_on_a_retained_volume_state_syncs_past_the_compacted_log(
    tmp_path: Path, etcd1: EtcdCluster
) -> None:
    nodes = ReplicaSet(tmp_path, etcd1, *COMPACT, block_interval=0.1).start(3)
    try:
        nodes.nodes[2].signal(signal.SIGTERM)  # scaled down; its volume is kept
        assert nodes.nodes[2].stop() == 0
        stale = status_height_of_stopped(nodes, 2)
        advance(nodes, 10)
        snap = snapshot(nodes.nodes[0])
        advance(nodes, 5)
        assert wait_compacted(etcd1, snap.block_number).first > stale + 1  # the log no longer continues it
        back = nodes.restart(2)  # scaled back up onto the retained volume
        assert any(f"state-synced block {snap.block_number} from n0" in line for line in back.stderr_lines)
        converge(nodes)
        assert read_tail(etcd1).first == snap.block_number
    finally:
        nodes.stop()


def status_height_of_stopped(nodes: ReplicaSet, index: int) -> int:
    height = store_height(nodes.nodes[index].data_dir)
    assert height is not None
    return height


def test_a_damaged_store_with_reinitialize_is_set_aside_and_state_synced(tmp_path: Path, etcd1: EtcdCluster) -> None:
    nodes = ReplicaSet(tmp_path, etcd1, *COMPACT, block_interval=0.1).start(3)
    try:
        snap = snapshot(nodes.nodes[0])
        advance(nodes, 5)
        wait_compacted(etcd1, snap.block_number)
        nodes.kill(2)
        data = nodes.nodes[2].data_dir / "data.mdb"
        with data.open("r+b") as f:
            f.truncate(8192)  # a damaged store: refused by the start-up checks, never mapped
        old = nodes.nodes[2]
        back = NodeProcess(old.data_dir, *old.args, "--reinitialize", env=old.env)
        nodes.nodes[2] = back
        nodes._started.append(back)
        back.start()
        assert any("--reinitialize" in line for line in back.stderr_lines)
        assert any(f"state-synced block {snap.block_number} from n0" in line for line in back.stderr_lines)
        assert list(old.data_dir.glob("replaced-*/data.mdb"))  # the damaged store is kept aside, not deleted
        converge(nodes)
    finally:
        nodes.stop()


def test_a_running_member_the_log_was_compacted_past_restarts_and_state_syncs(
    tmp_path: Path, etcd1: EtcdCluster
) -> None:
    """A member paused past its lease (a long stall, a partition from etcd) while the log was compacted past it
    cannot catch up from the log: it drains and exits with RESTART_EXIT_STATUS, and its next start state-syncs.
    Before, it halted live but not ready until an operator restarted it; with that halt back, this fails."""
    nodes = ReplicaSet(tmp_path, etcd1, *COMPACT, block_interval=0.1).start(3)
    try:
        lead = leader_index(nodes)
        paused, other = [i for i in range(3) if i != lead]
        live = [nodes.nodes[lead], nodes.nodes[other]]
        held = status(nodes.nodes[paused]).block_height
        nodes.nodes[paused].signal(signal.SIGSTOP)
        wait_member_gone(etcd1, f"n{paused}")  # its lease lapsed: its applied height no longer holds compaction
        wait_height(live, held + 5)
        snap = snapshot(nodes.nodes[other])
        wait_height(live, snap.block_number + 5)
        assert wait_compacted(etcd1, snap.block_number).first > held + 1  # the log no longer continues it
        nodes.nodes[paused].signal(signal.SIGCONT)
        proc = nodes.nodes[paused].proc
        assert proc is not None
        assert proc.wait(60) == RESTART_EXIT_STATUS
        lines = nodes.nodes[paused].stderr_lines
        assert any("restarts to state-sync from a member's snapshot" in line for line in lines)
        assert any("exiting so that the next start state-syncs" in line for line in lines)
        assert not any("STATE DIVERGED" in line for line in lines)
        back = nodes.restart(paused)  # what its supervisor does (a StatefulSet restarts the container)
        assert any(f"state-synced block {snap.block_number} from n{other}" in line for line in back.stderr_lines)
        converge(nodes)
    finally:
        nodes.stop()


def wait_member_gone(etcd: EtcdCluster, node_id: str, timeout: float = 30.0) -> None:
    async def present() -> bool:
        client = EtcdClient(etcd.endpoints)
        try:
            return bool(await client.range(Keys(b"/chain-node/").member(node_id)))
        finally:
            await client.close()

    deadline = time.monotonic() + timeout
    while asyncio.run(present()):
        assert time.monotonic() < deadline, f"member/{node_id} outlived its lease"
        time.sleep(0.2)
