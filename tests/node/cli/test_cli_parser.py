"""chainctl's command line without a node: help text, defaults, env variables, --version, the node
address, lazy start-up, and the bash completion script (sourced in a real bash)."""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from node.cli import commands
from node.cli.address import AddressError, node_target
from node.cli.completion import bash_script, walk
from node.cli.main import build_parser, env_defaults, main
from node.entry import lazy


def all_parsers() -> list[tuple[str, argparse.ArgumentParser]]:
    return list(walk(build_parser()))


def test_every_subcommand_is_listed_in_its_parents_help():
    for path, parser in all_parsers():
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                text = parser.format_help()
                for name in action.choices:
                    listed = re.search(rf"^    {re.escape(name)}(\s|$)", text, re.MULTILINE)
                    assert listed, f"`chainctl {path} --help` does not list {name}"


def test_help_shows_defaults_and_no_rst_markup():
    for path, parser in all_parsers():
        text = parser.format_help()
        assert "``" not in text, path
        for action in parser._actions:
            if action.option_strings and action.default not in (None, False, argparse.SUPPRESS, "", []):
                assert "default" in (action.help or ""), f"chainctl {path} {action.option_strings[0]}"
    top = build_parser().format_help()
    for var in ("CHAINCTL_NODE", "CHAINCTL_HOME", "CHAINCTL_ACCOUNT", "CHAINCTL_TIMEOUT"):
        assert var in top


def test_choices_match_the_handler_modules():
    from node.cli import account, config, project  # noqa: PLC0415, RUF100 - the heavy modules, for comparison
    from node.sdk import push  # noqa: PLC0415, RUF100 - as above

    assert set(commands.KEY_TYPES) == set(config.KEY_TYPES)
    assert commands.DEFAULT_RP_ID == config.DEFAULT_RP_ID
    assert set(commands.SCOPES) == set(account.SCOPES)
    assert set(commands.ACCOUNT_FIELDS) == set(account.ACCOUNT_FIELDS)
    assert set(commands.PROJECT_FIELDS) == set(project.PROJECT_FIELDS)
    assert set(commands.PERMISSIONS) == set(project.PERMISSIONS)
    assert commands.AUTHORITY_ENV == account.AUTHORITY_ENV
    assert commands.DEFAULT_BUNDLE == push.DEFAULT_BUNDLE
    handlers = [parser.get_default("func") for _, parser in all_parsers()]
    for func in handlers:
        if isinstance(func, lazy):
            assert callable(func.resolve()), func


def test_env_variables_set_the_global_flags():
    parser = build_parser()
    env_defaults(parser, {"CHAINCTL_NODE": "grpc://h:7", "CHAINCTL_TIMEOUT": "4.5", "CHAINCTL_ACCOUNT": "bob"})
    args = parser.parse_args(["status"])
    assert (args.node, args.timeout, args.account) == ("grpc://h:7", 4.5, "bob")
    assert parser.parse_args(["--node", "x", "status"]).node == "x"
    with pytest.raises(SystemExit):
        env_defaults(build_parser(), {"CHAINCTL_TIMEOUT": "soon"})


def test_version(capsys):
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("chainctl ") and out.split()[1][0].isdigit()


@pytest.mark.parametrize(
    ("text", "target"),
    [
        ("localhost", "localhost:50051"),
        ("localhost:7000", "localhost:7000"),
        ("grpc://node.example:9", "node.example:9"),
        ("http://127.0.0.1", "127.0.0.1:50051"),
        ("http://127.0.0.1:8080/", "127.0.0.1:8080"),
        ("::1", "[::1]:50051"),
        ("[::1]:5", "[::1]:5"),
        ("grpcs://node.example", "grpcs://node.example:50051"),
        ("https://node.example:443/", "grpcs://node.example:443"),
        ("grpcs://[::1]:7", "grpcs://[::1]:7"),
    ],
)
def test_node_addresses(text, target):
    assert node_target(text) == target


@pytest.mark.parametrize("text", ["", "ftp://h", "h:notaport", "http://h/v1/projects", "grpcs://h/x"])
def test_bad_node_addresses(text):
    with pytest.raises(AddressError):
        node_target(text)


def test_bad_node_flag_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as done:
        main(["--node", "ftp://h", "status"])
    assert done.value.code == 2
    assert "unknown scheme 'ftp'" in capsys.readouterr().err


def test_ca_file_with_a_plaintext_node_is_a_usage_error(capsys, tmp_path):
    """A CA file means the user expects TLS: a plaintext --node beside it is refused, not silently used."""
    with pytest.raises(SystemExit) as done:
        main(["--node", "localhost:1", "--ca-file", str(tmp_path / "ca.pem"), "status"])
    assert done.value.code == 2
    assert "--ca-file is for a TLS node" in capsys.readouterr().err


def test_help_loads_no_grpc_or_protobuf():
    """The start-up budget: `--help` imports only the standard library and chainctl's parser."""
    code = (
        "import sys\nfrom node.cli.main import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('grpc', 'google', 'chain', 'Crypto', "
        "'cryptography', 'coincurve', 'cffi') or m in ('node.cli.run', 'node.cli.common', 'node.sdk.push'))\n"
        "print('HEAVY', heavy, file=sys.stderr)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert "HEAVY []" in done.stderr, done.stderr


@pytest.fixture(scope="module")
def script(tmp_path_factory) -> Path:
    path: Path = tmp_path_factory.mktemp("completion") / "chainctl.bash"
    path.write_text(bash_script(build_parser()))
    return path


def complete(script: Path, line: str) -> list[str]:
    """COMPREPLY after typing ``line`` (a trailing space starts a new, empty word)."""
    words = line.split()
    if line.endswith(" "):
        words.append("")
    driver = (
        f"source {script}\n"
        f"COMP_WORDS=({' '.join(json.dumps(w) for w in words)})\n"
        f"COMP_CWORD={len(words) - 1}\n"
        "_chainctl\n"
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    bash = shutil.which("bash")
    assert bash is not None
    done = subprocess.run([bash, "--norc", "-c", driver], capture_output=True, text=True, timeout=30, check=True)
    return sorted(x for x in done.stdout.splitlines() if x)


def test_bash_completion(script):
    assert {"keys", "account", "project", "push", "mr", "completion"} <= set(complete(script, "chainctl "))
    assert complete(script, "chainctl pu") == ["push"]
    assert complete(script, "chainctl --node localhost:1 mr ") == ["--help", "-h", "close", "list", "open", "show"]
    assert complete(script, "chainctl project collaborator ") == ["--help", "-h", "add", "list", "remove"]
    assert complete(script, "chainctl keys create --type ") == ["ed25519", "p256", "secp256k1", "webauthn"]
    assert complete(script, "chainctl push --p") == ["--project", "--prune"]
    assert complete(script, "chainctl --js") == ["--json"]


def test_completion_command_prints_the_script(capsys):
    assert main(["completion", "bash"]) == 0
    assert capsys.readouterr().out == bash_script(build_parser())
    if os.name == "posix":
        assert "complete -o default -F _chainctl chainctl" in bash_script(build_parser())
