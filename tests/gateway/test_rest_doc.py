"""docs/rest.md's examples run as written: its first shell block, against the real `chain-gateway` and node
(`localhost:8080` replaced by the test gateway's address), ends without error and prints what it says."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.fixtures.gwproc import GatewayProcess

DOC = Path(__file__).resolve().parents[2] / "docs" / "rest.md"


def first_shell_block() -> str:
    match = re.search(r"```sh\n(.*?)```", DOC.read_text(), re.S)
    assert match is not None, "docs/rest.md has no ```sh block"
    return match.group(1)


def test_the_examples_of_docs_rest_run_as_written(gateway: GatewayProcess) -> None:
    if shutil.which("jq") is None or shutil.which("curl") is None:
        pytest.skip("curl and jq are needed")
    script = first_shell_block()
    assert "localhost:8080" in script
    host_port = gateway.url.removeprefix("http://")
    run = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", script.replace("localhost:8080", host_port)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert run.returncode == 0, (run.stdout, run.stderr)
    lines = [line.strip() for line in run.stdout.splitlines()]
    assert lines[0] == '"devnet"'
    assert int(lines[1]) > 20 and int(lines[2]) >= 1
    assert lines[3] == '"NOT_FOUND"'
    assert lines[4].lower() == "allow: post"
    assert lines[5] == '"UNSUPPORTED_MEDIA_TYPE"'
    assert lines[6].lower() == "grpc-status: 0"
