from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fixtures.etcdproc import EtcdCluster
from tests.fixtures.replicaset import ReplicaSet


@pytest.fixture
def three(tmp_path: Path, etcd1: EtcdCluster) -> Iterator[ReplicaSet]:
    nodes = ReplicaSet(tmp_path, etcd1).start(3)
    yield nodes
    nodes.stop()
