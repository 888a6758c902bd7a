"""The ruff rules that keep the house plan, exercised: each snippet is linted as if it lived at a given path.

Nothing is written to the tree: ruff reads the snippet from stdin and takes the path (`--stdin-filename`) to
pick the configuration (pyproject.toml, node/observability/ruff.toml) and the per-file ignores.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def codes(path: str, source: str) -> set[str]:
    """The rule codes ruff reports for `source` placed at `path` (relative to the repository root)."""
    done = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format", "json", "--stdin-filename", path, "-"],
        input=source,
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode in (0, 1), done.stderr
    return {d["code"] for d in json.loads(done.stdout)}


def branches(n: int) -> str:
    """A function of cyclomatic complexity n + 1."""
    body = "".join(f"    if x == {i}:\n        return {i}\n" for i in range(n))
    return f"def f(x: int) -> int:\n{body}    return -1\n"


LAZY = "def f() -> str:\n    import json\n\n    return json.dumps(1)\n"
SDK = "from node.sdk.keys import Ed25519Key\n\nprint(Ed25519Key)\n"
CLI = "from node.cli import main\n\nprint(main)\n"


@pytest.mark.parametrize("path", ["node/server/x.py", "gateway/x.py", "node/state/x.py", "node/sdk/x.py"])
def test_imports_stay_at_module_level(path: str) -> None:
    assert "PLC0415" in codes(path, LAZY)


@pytest.mark.parametrize(
    "path",
    [
        "node/server/rpc/x.py",
        "node/state/x.py",
        "node/storage/x.py",
        "node/query/x.py",
        "node/merkle/x.py",
        "gateway/x.py",
        "operator/chain_operator/x.py",
        "node/observability/x.py",
    ],
)
@pytest.mark.parametrize("source", [SDK, CLI])
def test_server_side_may_not_import_client_code(path: str, source: str) -> None:
    assert "TID251" in codes(path, source)


@pytest.mark.parametrize("path", ["node/sdk/x.py", "node/cli/x.py", "tests/x.py"])
def test_client_code_and_tests_may(path: str) -> None:
    assert "TID251" not in codes(path, SDK)


@pytest.mark.parametrize("source", ["from node.server.app import NodeApp\n\nprint(NodeApp)\n", "import gateway.app\n"])
def test_shared_observability_may_not_import_node_server_or_gateway(source: str) -> None:
    assert "TID251" in codes("node/observability/x.py", source)
    assert "TID251" not in codes("node/server/telemetry/x.py", source)


def test_complexity_is_bounded_at_15() -> None:
    assert "C901" not in codes("node/server/x.py", branches(14))
    assert "C901" in codes("node/server/x.py", branches(15))
