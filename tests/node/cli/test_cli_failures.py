"""chainctl and git-remote-chain as installed (.venv/bin), failing on bad input or a node that is down: every
failure is one stderr line with its reason code and the documented exit code (2 for a usage error, 1 for
any other failure), never a traceback; numbers out of their range are usage errors before anything runs."""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from node import constants as C
from node.cli import argtypes, remote_serve
from node.cli.remote_helper import parse_url
from node.cli.run import execute
from tests.fixtures.nodeproc import NodeProcess
from tests.node.sdk.gitrepos import git_env, sh

BIN = Path(sys.executable).parent
DOWN = "127.0.0.1:1"  # nothing listens there


@dataclass
class Run:
    rc: int
    out: str
    err: str

    def line(self) -> str:
        """The one stderr line (and no traceback anywhere)."""
        assert "Traceback" not in self.err + self.out, self.err
        lines = self.err.splitlines()
        assert len(lines) == 1, self.err
        return lines[0]


@dataclass
class Chainctl:
    node: NodeProcess
    home: Path

    def __call__(self, *args: str, env: dict[str, str] | None = None) -> Run:
        full = {**os.environ, "CHAINCTL_NODE": self.node.grpc_target, "CHAINCTL_HOME": str(self.home), **(env or {})}
        done = subprocess.run(
            [str(BIN / "chainctl"), *args], env=full, capture_output=True, text=True, timeout=60, check=False
        )
        return Run(done.returncode, done.stdout, done.stderr)

    @property
    def authority(self) -> str:
        return str(self.node.ready["devnet_authority"])


@pytest.fixture(scope="module")
def chainctl(tmp_path_factory) -> Iterator[Chainctl]:
    base = tmp_path_factory.mktemp("cli-failures")
    node = NodeProcess(base / "data", "--web-addr", "").start()
    try:
        c = Chainctl(node, base / "home")
        assert c("keys", "create", "wallet", "--type", "secp256k1").rc == 0
        assert c("keys", "create", "signer").rc == 0
        yield c
    finally:
        node.stop()


def short_key(home: Path, name: str) -> Path:
    """A key file like chainctl's, but with a 31-byte private key."""
    good = json.loads((home / "keys" / "signer.json").read_text())
    path = home / "keys" / f"{name}.json"
    path.write_text(json.dumps({**good, "name": name, "private_key": good["private_key"][:-2]}))
    return path


# ---- numbers out of range: usage errors (exit 2) at parse time ----


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (("account", "fund", "wallet", "--units", "-1"), "--units"),
        (("account", "fund", "wallet", "--units", str(2**32)), "--units"),
        (("project", "list", "--limit", "-1"), "--limit"),
        (("project", "list", "--limit", "0"), "--limit"),
        (("--timeout", "-5", "status"), "--timeout"),
        (("--timeout", "0", "status"), "--timeout"),
        (("--retry-seconds", "-1", "status"), "--retry-seconds"),
        (
            ("account", "authorize-custody", "--wallet", "wallet", "--key", "wallet", "--expires-at", str(2**64)),
            "--expires-at",
        ),
    ],
)
def test_numbers_out_of_range_are_usage_errors(chainctl, args, flag):
    run = chainctl(*args, "--authority", chainctl.authority) if args[1] == "fund" else chainctl(*args)
    line = run.line()
    assert run.rc == 2, run.err
    assert line.startswith("error: INVALID_ARGUMENT: chainctl"), line
    assert f"argument {flag}:" in line and "--help" in line


def test_timeout_from_the_environment_is_checked_too(chainctl):
    run = chainctl("status", env={"CHAINCTL_TIMEOUT": "0"})
    assert run.rc == 2
    assert run.line().startswith("error: INVALID_ARGUMENT: chainctl: CHAINCTL_TIMEOUT='0'")


def test_units_within_the_field_reach_the_node(chainctl):
    """The parse-time range is the field's (uint32): its top value and 0 are sent, and the node answers
    with its own reason (a grant is 1-1000 units), in one line, exit 1."""
    for units in (str(2**32 - 1), "0"):
        run = chainctl("account", "fund", "wallet", "--units", units, "--authority", chainctl.authority)
        assert run.rc == 1
        assert run.line() == "error: INVALID_FIELD: units: must be 1-1000"
    assert chainctl("account", "fund", "wallet", "--units", "1", "--authority", chainctl.authority).rc == 0


def test_parser_ranges_match_the_protocol():
    assert argtypes.MAX_PAGE_SIZE == C.MAX_PAGE_SIZE
    assert argtypes.int_in(1, 3)("3") == 3
    with pytest.raises(argparse.ArgumentTypeError):
        argtypes.seconds(allow_zero=False)("inf")


# ---- key files ----


def test_a_key_file_with_a_wrong_length_key_is_one_line(chainctl):
    path = short_key(chainctl.home, "short")
    try:
        run = chainctl("keys", "show", "short")
        assert run.rc == 1
        line = run.line()
        assert line.startswith("error: INVALID_KEY: key file ") and str(path) in line
        assert "32 bytes, got 31" in line
        signing = chainctl("account", "init", "--wallet", "wallet", "--key", "short")
        assert signing.rc == 1 and signing.line().startswith("error: INVALID_KEY:")
    finally:
        path.unlink()


def test_keys_list_lists_what_it_can_read_and_names_what_it_cannot(chainctl):
    short = short_key(chainctl.home, "short")
    junk = chainctl.home / "keys" / "junk.json"
    junk.write_text("{not json")
    try:
        run = chainctl("keys", "list")
        assert run.rc == 1
        assert "Traceback" not in run.err
        listed = [line.split("\t")[0] for line in run.out.splitlines()]
        assert listed == ["signer", "wallet"]
        errors = run.err.splitlines()
        assert len(errors) == 2, run.err
        assert errors[0].startswith("error: INVALID_KEY: key file ") and str(junk) in errors[0]
        assert errors[1].startswith("error: INVALID_KEY: key file ") and str(short) in errors[1]
        as_json = chainctl("--json", "keys", "list")
        doc = json.loads(as_json.out)
        assert as_json.rc == 1
        assert [k["name"] for k in doc["keys"]] == ["signer", "wallet"]
        assert [u["reason"] for u in doc["unreadable"]] == ["INVALID_KEY", "INVALID_KEY"]
        assert str(short) in doc["unreadable"][1]["message"]
    finally:
        short.unlink()
        junk.unlink()
    assert chainctl("keys", "list").rc == 0


# ---- the authority file ----


def test_authority_pointing_at_the_wrong_file(chainctl, tmp_path):
    not_json = tmp_path / "notes.txt"
    not_json.write_text("hello")
    other = tmp_path / "other.json"
    other.write_text('{"x": 1}')
    cases = {
        str(chainctl.home / "keys" / "wallet.json"): "is a chainctl key file: it has no wallet_private_key",
        str(other): "is not an authority file: it has no wallet_private_key",
        str(not_json): "is not JSON",
        str(tmp_path): "cannot read it: Is a directory",
        str(tmp_path / "missing.json"): "not found",
    }
    for path, words in cases.items():
        run = chainctl("account", "fund", "wallet", "--authority", path)
        line = run.line()
        assert run.rc == 1, run.err
        assert line.startswith(f"error: INVALID_ARGUMENT: authority file {path}"), line
        assert words in line, line
        assert "KeyError" not in line and "'wallet_private_key'" not in line


# ---- a node that is down ----


def test_a_node_that_is_down_is_said_once(chainctl):
    run = chainctl("--node", DOWN, "status")
    assert run.rc == 1
    assert run.line() == f"error: UNAVAILABLE: cannot reach the node at {DOWN}: connection refused"


def test_git_push_with_the_node_down_prints_one_line(chainctl, tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    sh(repo, "init", "-q", "-b", "main")
    sh(repo, "commit", "-q", "--allow-empty", "-m", "one")
    env = {
        **git_env(1_700_000_000),
        "CHAINCTL_HOME": str(chainctl.home),
        "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}",
    }
    done = subprocess.run(
        ["git", "-C", str(repo), "push", f"chain://{DOWN}/wallet/hello", "main"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    run = Run(done.returncode, done.stdout, done.stderr)
    assert run.rc != 0
    line = run.line()
    assert line == f"fatal: chain: UNAVAILABLE: cannot reach the node at {DOWN}: connection refused", line


# ---- anything else is still one line ----


def _namespace(func: object) -> argparse.Namespace:
    return argparse.Namespace(
        home=Path("/nonexistent"), json=False, account=None, timeout=1.0, retry_seconds=0.0, ca_file=None, func=func
    )


def test_an_unexpected_failure_is_one_line_with_its_type(monkeypatch):
    def boom(ctx: object, args: object) -> None:
        raise RuntimeError("boom\nsecond line")

    monkeypatch.delenv("CHAINCTL_TRACEBACK", raising=False)
    out, err = io.StringIO(), io.StringIO()
    assert execute(_namespace(boom), DOWN, out, err) == 1
    assert err.getvalue() == "error: UNKNOWN: RuntimeError: boom second line (set CHAINCTL_TRACEBACK=1 to see where)\n"
    monkeypatch.setenv("CHAINCTL_TRACEBACK", "1")
    with pytest.raises(RuntimeError):
        execute(_namespace(boom), DOWN, io.StringIO(), io.StringIO())


def test_a_file_that_cannot_be_read_names_the_file(chainctl, tmp_path):
    run = chainctl("keys", "import", "k", "--type", "ed25519", "--private-key-file", str(tmp_path / "nope"))
    assert run.rc == 1
    assert run.line() == f"error: INVALID_ARGUMENT: {tmp_path / 'nope'}: No such file or directory"


def test_the_remote_helper_answers_a_bad_option_value_without_failing(tmp_path):
    """gitremote-helpers(7): an option git sends with a value the helper cannot take is `error <why>`."""
    sh(tmp_path, "init", "-q")
    env = {**os.environ, "GIT_DIR": str(tmp_path / ".git"), "CHAINCTL_HOME": str(tmp_path / "home")}
    done = subprocess.run(
        [str(BIN / "git-remote-chain"), "origin", f"chain://{DOWN}/0x{'00' * 32}"],
        input="option verbosity abc\noption verbosity 2\n\n",
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stdout.splitlines() == ["error verbosity must be a whole number, not 'abc'", "ok"]


def test_an_unexpected_failure_of_the_remote_helper_is_one_line(tmp_path, monkeypatch):
    def boom(helper: object, stdin: object) -> int:
        raise RuntimeError("boom\nsecond line")

    sh(tmp_path, "init", "-q")
    monkeypatch.setenv("GIT_DIR", str(tmp_path / ".git"))
    monkeypatch.setenv("CHAINCTL_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("CHAINCTL_TRACEBACK", raising=False)
    monkeypatch.setattr(remote_serve, "serve", boom)
    url = parse_url(f"chain://{DOWN}/0x{'00' * 32}")
    err = io.BytesIO()
    assert remote_serve.run(url, err) == 1
    assert err.getvalue().decode() == (
        "fatal: chain: UNKNOWN: RuntimeError: boom second line (set CHAINCTL_TRACEBACK=1 to see where)\n"
    )
    monkeypatch.setenv("CHAINCTL_TRACEBACK", "1")
    with pytest.raises(RuntimeError):
        remote_serve.run(url, io.BytesIO())
