from collections.abc import Iterator

import pytest

from tests.node.server.nodeproc import NodeProcess


@pytest.fixture
def node(tmp_path) -> Iterator[NodeProcess]:
    proc = NodeProcess(tmp_path / "data", "--cors-origin", "http://allowed.test", "--web-addr", "").start()
    yield proc
    proc.stop()
