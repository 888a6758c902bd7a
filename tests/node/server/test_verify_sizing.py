"""Verify and read workers sized from what the process may use (CPU quota, memory limit), from fake cgroup trees."""

from __future__ import annotations

from pathlib import Path

from node.server.config import NodeConfig
from node.server.readers.supervisor import MAX_AUTO_READ_WORKERS, read_worker_count
from node.server.write.sizing import (
    MAX_AUTO_WORKERS,
    Resources,
    auto_workers,
    cpu_quota,
    memory_limit,
    verify_worker_count,
)

GiB = 1024**3


def tree(root: Path, files: dict[str, str], proc: str) -> tuple[Path, Path]:
    for rel, text in files.items():
        path = root / "cgroup" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text + "\n")
    (root / "cgroup").mkdir(exist_ok=True)
    (root / "proc-cgroup").write_text(proc)
    return root / "cgroup", root / "proc-cgroup"


def test_cgroup_v2_quota_and_memory(tmp_path: Path) -> None:
    root, proc = tree(tmp_path, {"cpu.max": "200000 100000", "memory.max": str(2 * GiB)}, "0::/\n")
    assert cpu_quota(root, proc) == 2.0
    assert memory_limit(root, proc) == 2 * GiB


def test_cgroup_v2_the_tightest_ancestor_wins(tmp_path: Path) -> None:
    files = {
        "kubepods/cpu.max": "150000 100000",
        "kubepods/pod1/cpu.max": "max 100000",
        "kubepods/pod1/ctr/cpu.max": "400000 100000",
        "kubepods/pod1/ctr/memory.max": "max",
    }
    root, proc = tree(tmp_path, files, "0::/kubepods/pod1/ctr\n")
    assert cpu_quota(root, proc) == 1.5
    assert memory_limit(root, proc) is None


def test_cgroup_v2_without_a_quota(tmp_path: Path) -> None:
    root, proc = tree(tmp_path, {"cpu.max": "max 100000"}, "0::/\n")
    assert cpu_quota(root, proc) is None


def test_cgroup_v1_quota_and_unlimited_memory(tmp_path: Path) -> None:
    files = {
        "cpu,cpuacct/cpu.cfs_quota_us": "300000",
        "cpu,cpuacct/cpu.cfs_period_us": "100000",
        "memory/memory.limit_in_bytes": "9223372036854771712",  # v1's "no limit"
    }
    root, proc = tree(tmp_path, files, "4:memory:/\n2:cpu,cpuacct:/\n0::/\n")
    assert cpu_quota(root, proc) == 3.0
    assert memory_limit(root, proc) is None
    files["cpu,cpuacct/cpu.cfs_quota_us"] = "-1"  # v1's "no quota"
    root, proc = tree(tmp_path / "b", files, "2:cpu,cpuacct:/\n")
    assert cpu_quota(root, proc) is None


def test_a_64_core_host_with_a_2_cpu_quota_gets_one_worker(tmp_path: Path) -> None:
    root, proc = tree(tmp_path, {"cpu.max": "200000 100000", "memory.max": str(2 * GiB)}, "0::/\n")
    res = Resources.detect(cgroup_root=root, proc_cgroup=proc, affinity=64)
    assert (res.cpus, res.source, res.memory_bytes) == (2.0, "cgroup quota", 2 * GiB)
    assert auto_workers(res) == 1  # not 63
    pinned = Resources.detect(cgroup_root=root, proc_cgroup=proc, affinity=1)  # taskset / cpuset to one CPU
    assert (pinned.cpus, pinned.source, auto_workers(pinned)) == (1.0, "affinity", 0)


def test_the_stated_limit_and_memory_bound_the_workers(tmp_path: Path) -> None:
    root, proc = tree(tmp_path, {}, "0::/\n")
    res = Resources.detect(cpu_limit=1.0, cgroup_root=root, proc_cgroup=proc, affinity=64)
    assert res.cpus == 1.0 and res.source == "--cpu-limit" and auto_workers(res) == 0
    assert auto_workers(Resources(64.0, 2 * GiB, "affinity")) == min(MAX_AUTO_WORKERS, (2 * GiB - 512 * 2**20) // 2**26)
    assert auto_workers(Resources(64.0, 768 * 2**20, "affinity")) == 4  # memory, not CPUs, bounds it
    assert auto_workers(Resources(64.0, None, "affinity")) == MAX_AUTO_WORKERS
    assert auto_workers(Resources(0.5, None, "cgroup quota")) == 0
    assert auto_workers(Resources(2.0, 256 * 2**20, "cgroup quota")) == 0  # no room for a worker at all


def test_missing_files_mean_no_limit(tmp_path: Path) -> None:
    assert cpu_quota(tmp_path / "none", tmp_path / "none") is None
    assert memory_limit(tmp_path / "none", tmp_path / "none") is None


def test_read_workers_auto_is_one_per_cpu_at_most_four_none_on_one_cpu() -> None:
    assert read_worker_count(-1, Resources(1.0, None, "affinity")) == 0  # a 1-CPU devnet: none
    assert read_worker_count(-1, Resources(1.9, None, "cgroup quota")) == 0  # whole CPUs only
    assert read_worker_count(-1, Resources(2.0, None, "affinity")) == 2  # the 2-core machine: one per core
    assert read_worker_count(-1, Resources(3.5, None, "cgroup quota")) == 3
    assert read_worker_count(-1, Resources(64.0, None, "affinity")) == MAX_AUTO_READ_WORKERS == 4
    assert read_worker_count(-1, Resources(64.0, 640 * 2**20, "affinity")) == 2  # memory bounds it
    assert read_worker_count(-1, Resources(2.0, 600 * 2**20, "cgroup quota")) == 1  # (600-512)//64
    assert read_worker_count(0, Resources(64.0, None, "affinity")) == 0  # 0: the main process alone
    assert read_worker_count(6, Resources(1.0, None, "affinity")) == 6  # a number is taken as given


def test_the_default_read_workers_are_sized_from_a_cgroup_quota_and_memory(tmp_path: Path) -> None:
    files = {"cpu.max": "300000 100000", "memory.max": str(GiB)}
    root, proc = tree(tmp_path, files, "0::/\n")
    res = Resources.detect(cgroup_root=root, proc_cgroup=proc, affinity=64)
    verify = verify_worker_count(NodeConfig().verify_workers, res)
    assert verify == 2  # one per CPU beyond the first of the 3-CPU quota
    assert read_worker_count(NodeConfig().read_workers, res, verify) == 3  # one per CPU of the quota
    files["memory.max"] = str(704 * 2**20)  # 512 MiB for the node, 2 x 64 for verify: room for one reader
    root, proc = tree(tmp_path / "tight", files, "0::/\n")
    res = Resources.detect(cgroup_root=root, proc_cgroup=proc, affinity=64)
    assert read_worker_count(-1, res, verify_worker_count(-1, res)) == 1
    pinned = Resources.detect(cgroup_root=root, proc_cgroup=proc, affinity=1)  # taskset / cpuset to one CPU
    assert read_worker_count(-1, pinned, verify_worker_count(-1, pinned)) == 0


def test_verify_workers_auto_is_sized_and_a_number_is_taken_as_given() -> None:
    assert verify_worker_count(-1, Resources(3.0, None, "affinity")) == 2
    assert verify_worker_count(-1, Resources(64.0, 768 * 2**20, "affinity")) == 4  # memory bounds it
    assert verify_worker_count(5, Resources(1.0, None, "affinity")) == 5


def test_read_workers_auto_fit_in_the_memory_the_verify_workers_leave() -> None:
    res = Resources(64.0, GiB, "affinity")
    verify = verify_worker_count(-1, res)
    assert verify == (GiB - 512 * 2**20) // 2**26 == 8  # 512 MiB for the node, 64 MiB per worker
    assert read_worker_count(-1, res) == MAX_AUTO_READ_WORKERS  # alone, reads would take four more
    assert read_worker_count(-1, res, verify) == 0  # beside eight verify workers there is no room left
    assert read_worker_count(-1, Resources(64.0, 2 * GiB, "affinity"), verify) == MAX_AUTO_READ_WORKERS
    assert read_worker_count(-1, Resources(64.0, 1280 * 2**20, "affinity"), verify) == 4  # (1280-512-512)/64
    assert read_worker_count(-1, Resources(64.0, None, "affinity"), verify) == MAX_AUTO_READ_WORKERS
    assert read_worker_count(3, res, verify) == 3  # a number is taken as given
    assert Resources(2.0, GiB, "affinity").after(4) == Resources(2.0, GiB - 4 * 2**26, "affinity")
    assert Resources(2.0, 2**26, "affinity").after(4).memory_bytes == 0
