from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.node.replicated.cluster import ReplicaSet
from tests.node.replicated.etcdproc import EtcdCluster


@pytest.fixture
def etcd1(tmp_path: Path) -> Iterator[EtcdCluster]:
    cluster = EtcdCluster(tmp_path / "etcd", 1).start()
    yield cluster
    cluster.stop()


@pytest.fixture
def etcd3(tmp_path: Path) -> Iterator[EtcdCluster]:
    cluster = EtcdCluster(tmp_path / "etcd", 3).start()
    yield cluster
    cluster.stop()


@pytest.fixture
def three(tmp_path: Path, etcd1: EtcdCluster) -> Iterator[ReplicaSet]:
    nodes = ReplicaSet(tmp_path, etcd1).start(3)
    yield nodes
    nodes.stop()
