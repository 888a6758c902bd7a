"""docs/chainctl.md runs as written: every block marked `<!-- tested: <this file> -->` is a transcript
(`$ command` lines, each followed by the output the doc shows): the first session (a demo repository,
keys, account, funding, project, push, query, a passkey), `git push` through the remote helper, and the
`query` examples (a block of bare commands: each must exit 0 and print one JSON object). Their
commands run in order in one bash against a real chain-node subprocess. Only the surroundings are the
test's: the node's address (`CHAINCTL_NODE`, and `localhost:50051` in the git remote's URL), the key store
(`CHAINCTL_HOME`), a temporary working directory holding the node's data directory `./devnet` (so
`--authority devnet/devnet-authority.json` is the doc's own path) and a git identity. Each command must
exit 0 (1 where the doc shows an `error:` line) and print lines of the shape the doc shows: hex values,
numbers and `...` elisions are placeholders, every other character is literal."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.fixtures.nodeproc import NodeProcess

DOC = Path(__file__).resolve().parents[3] / "docs" / "chainctl.md"
MARK = "<!-- tested: tests/node/cli/test_chainctl_doc.py -->"
SEP = "@@chainctl-doc-step@@"
DOC_NODE = "localhost:50051"
ASSIGNMENT = re.compile(r"[A-Za-z_]\w*=")

_PLACEHOLDERS = re.compile(r"0x[0-9a-f]+(?:\.\.\.[0-9a-f]+)?|\b[0-9a-f]{7,40}\b|\d+|\.\.\.")


@dataclass
class Step:
    """One command and the lines the doc shows after it; `json` for a block of bare commands (no `$`)
    whose answers the doc describes as JSON documents (an assignment `NAME=$(...)` prints nothing)."""

    command: str
    expected: list[str] = field(default_factory=list)
    json: bool = False


def marked_blocks(text: str) -> list[str]:
    blocks = re.findall(re.escape(MARK) + r"\n```\n(.*?)```", text, re.S)
    assert blocks, f"docs/chainctl.md marks no block with {MARK}"
    return blocks


def transcript(block: str) -> list[Step]:
    if not any(line.startswith("$ ") for line in block.splitlines()):
        commands = [line for line in block.splitlines() if line.strip() and not line.startswith("#")]
        return [Step(line, json=not ASSIGNMENT.match(line)) for line in commands]
    steps: list[Step] = []
    for line in block.splitlines():
        if line.startswith("$ "):
            steps.append(Step(line[2:]))
        elif line.strip():
            assert steps, f"output before any command: {line!r}"
            steps[-1].expected.append(line)
    return steps


def shape(expected: str) -> re.Pattern[str]:
    """The documented line as a pattern: placeholders for values that differ per run, the rest literal."""
    parts: list[str] = []
    pos = 0
    for m in _PLACEHOLDERS.finditer(expected):
        parts.append(re.escape(expected[pos : m.start()]))
        token = m.group()
        if token == "...":
            parts.append(".*")
        elif token.startswith("0x"):
            parts.append("0x[0-9a-f]+")
        elif token.isdigit():
            parts.append(r"\d+")
        else:
            parts.append("[0-9a-f]+")
        pos = m.end()
    parts.append(re.escape(expected[pos:]))
    return re.compile("".join(parts))


def script(steps: list[Step]) -> str:
    """One bash run (shell variables carry over), each step's stdout+stderr followed by a marker with its code."""
    lines = []
    for step in steps:
        lines.append(f'{{ {step.command}\n}} 2>&1; echo "{SEP} $?"')
    return "\n".join(lines) + "\n"


def outputs(stdout: str) -> Iterator[tuple[list[str], int]]:
    chunk: list[str] = []
    for line in stdout.splitlines():
        if line.startswith(SEP):
            yield [x for x in chunk if x.strip()], int(line.split()[1])
            chunk = []
        else:
            chunk.append(line)


@pytest.fixture
def devnet(tmp_path: Path) -> Iterator[NodeProcess]:
    proc = NodeProcess(tmp_path / "devnet").start()
    yield proc
    proc.stop()


def test_the_first_session_of_docs_chainctl_runs_as_written(devnet: NodeProcess, tmp_path: Path) -> None:
    for tool in ("git", "jq"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is needed")
    text = DOC.read_text().replace(DOC_NODE, devnet.grpc_target)  # the git remote's URL names the node
    steps = [step for block in marked_blocks(text) for step in transcript(block)]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CHAINCTL_", "GIT_"))}
    env.update(
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
        CHAINCTL_NODE=devnet.grpc_target,
        CHAINCTL_HOME=str(tmp_path / "home"),
        HOME=str(tmp_path),
        GIT_CONFIG_NOSYSTEM="1",
        GIT_AUTHOR_NAME="Doc Reader",
        GIT_AUTHOR_EMAIL="reader@example.com",
        GIT_COMMITTER_NAME="Doc Reader",
        GIT_COMMITTER_EMAIL="reader@example.com",
    )
    run = subprocess.run(
        ["bash", "-o", "pipefail", "-c", script(steps)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    results = list(outputs(run.stdout))
    assert len(results) == len(steps), (run.stdout, run.stderr)
    for step, (got, rc) in zip(steps, results, strict=True):
        if step.json:
            assert rc == 0, (step.command, got)
            assert isinstance(json.loads("\n".join(got)), dict), (step.command, got)
            continue
        failing = bool(step.expected) and step.expected[0].startswith("error: ")
        assert rc == (1 if failing else 0), (step.command, got)
        assert len(got) == len(step.expected), (step.command, got, step.expected)
        for want, line in zip(step.expected, got, strict=True):
            assert shape(want).fullmatch(line), (step.command, want, line)
