"""Fixtures shared by the node tests: real etcd clusters on loopback ports (tests/node/replicated/etcdproc.py)."""

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.node.replicated.etcdproc import EtcdCluster


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
