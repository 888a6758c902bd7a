"""Every Python block of docs/sdk.md runs as written, in order, in one namespace, against real nodes: `NODE`
(a plaintext devnet node), `AUTHORITY_FILE` (its storage authority), `TLS_NODE` and `CA_FILE` (a node
serving TLS and its CA), the names the page says its blocks read."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from tests.fixtures.certs import TestCA
from tests.fixtures.nodeproc import ROOT, NodeProcess, NodeTLSFiles

DOC = ROOT / "docs" / "sdk.md"
BLOCK = re.compile(r"^```python\n(.*?)^```$", re.S | re.M)


def blocks() -> list[str]:
    return BLOCK.findall(DOC.read_text())


@pytest.fixture(scope="module")
def names(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    base = tmp_path_factory.mktemp("sdk-doc")
    ca = TestCA.make(base / "pki")
    leaf = ca.issue("node", sans=("localhost",))
    plain = NodeProcess(base / "plain")
    tls = NodeProcess(base / "tls", tls=NodeTLSFiles(leaf.cert, leaf.key, ca.cert))
    try:
        plain.start()
        tls.start()
        yield {
            "NODE": plain.grpc_target,
            "AUTHORITY_FILE": plain.ready["devnet_authority"],
            "TLS_NODE": f"grpcs://localhost:{tls.ready['grpc_port']}",
            "CA_FILE": str(ca.cert),
        }
    finally:
        plain.stop()
        tls.stop()


def test_the_page_has_an_example_for_every_section() -> None:
    text = DOC.read_text()
    for section in ("Install", "Connect", "Sign and submit", "Read", "Paginate", "Subscribe", "Prove", "Errors"):
        assert f"## {section}" in text
    assert len(blocks()) >= 10


def run(codes: list[str], namespace: dict[str, Any]) -> None:
    """Execute the blocks in order in `namespace`; a failing block fails with its number and its code."""
    for number, code in enumerate(codes, 1):
        try:
            exec(compile(code, f"docs/sdk.md block {number}", "exec"), namespace)
        except Exception as exc:
            raise AssertionError(f"docs/sdk.md block {number} failed: {exc!r}\n{code}") from exc


def test_every_python_block_runs(names: dict[str, Any]) -> None:
    namespace: dict[str, Any] = {"__name__": "sdk_doc", **names}
    run(blocks(), namespace)
    assert namespace["project"].name == "hello"  # the blocks did run, and shared their names


def test_a_failing_block_fails_the_run() -> None:
    with pytest.raises(AssertionError, match="block 2 failed"):
        run(["x = 1", "assert x == 2"], {})
