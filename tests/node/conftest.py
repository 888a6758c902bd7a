"""Fixtures shared by the node tests: a chain-node process, real etcd clusters on loopback ports, a tmpfs."""

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fixtures.disk import mount_tmpfs
from tests.fixtures.etcdproc import EtcdCluster
from tests.fixtures.nodeproc import NodeProcess


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A small real file system to fill (24 MiB); the test is skipped without root."""
    yield from mount_tmpfs(tmp_path)


@pytest.fixture
def etcd1(tmp_path: Path) -> Iterator[EtcdCluster]:
    """A one-member etcd."""
    cluster = EtcdCluster(tmp_path / "etcd", 1).start()
    yield cluster
    cluster.stop()


@pytest.fixture
def etcd3(tmp_path: Path) -> Iterator[EtcdCluster]:
    """A three-member etcd cluster."""
    cluster = EtcdCluster(tmp_path / "etcd", 3).start()
    yield cluster
    cluster.stop()


@pytest.fixture
def node(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[NodeProcess]:
    """A devnet chain-node process that allows the origin http://allowed.test. Parametrised indirectly with a
    number (tests.fixtures.nodeproc.READ_WORKERS), it runs that many read workers: every call then reaches
    the node through a worker, which answers reads itself and relays the rest to the main process."""
    workers = int(getattr(request, "param", 0))
    proc = NodeProcess(tmp_path / "data", "--cors-origin", "http://allowed.test", "--read-workers", str(workers)).start(
        timeout=120
    )
    yield proc
    proc.stop()
