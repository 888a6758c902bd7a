"""Flags from the environment: names, conversion, lists, switches, and a usage error (not a traceback) for bad
values; the help that names each flag's default and variable; --version."""

from __future__ import annotations

import argparse
from importlib import metadata
from types import ModuleType

import pytest

import chain_operator.config
import gateway.config
import node.server.config
from node.envflags import add_version, describe_env, env_actions, env_defaults, env_name, is_switch


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="demo")
    p.add_argument("--listen-addr", default="localhost:1")
    p.add_argument("--interval", type=float, default=1.0)
    p.add_argument("--mode", default="solo", choices=["solo", "etcd"])
    p.add_argument("--origin", action="append", dest="origins", default=None)
    return p


def parse(env: dict[str, str], argv: list[str] | None = None) -> argparse.Namespace:
    p = parser()
    env_defaults(p, "DEMO_", env, lists={"origins"})
    return p.parse_args(argv or [])


def test_variables_fill_flags_and_the_command_line_wins() -> None:
    ns = parse({"DEMO_LISTEN_ADDR": "0.0.0.0:9", "DEMO_INTERVAL": "0.25", "DEMO_MODE": "etcd", "OTHER": "x"})
    assert (ns.listen_addr, ns.interval, ns.mode, ns.origins) == ("0.0.0.0:9", 0.25, "etcd", None)
    assert parse({"DEMO_INTERVAL": "0.25"}, ["--interval", "2"]).interval == 2.0


def test_a_list_flag_takes_comma_separated_values() -> None:
    assert parse({"DEMO_ORIGIN": "https://a.test, https://b.test,,"}).origins == ["https://a.test", "https://b.test"]


@pytest.mark.parametrize(
    ("env", "named"),
    [({"DEMO_INTERVAL": "soon"}, "DEMO_INTERVAL='soon'"), ({"DEMO_MODE": "raft"}, "DEMO_MODE='raft': choose from")],
)
def test_a_bad_value_is_a_usage_error_naming_the_variable(
    env: dict[str, str], named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        parse(env)
    assert exit_info.value.code == 2
    assert named in capsys.readouterr().err


def switch_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="demo")
    p.add_argument("--reinitialize", action="store_true", help="start over")
    return p


@pytest.mark.parametrize(("raw", "value"), [("1", True), ("Yes", True), ("on", True), ("0", False), ("off", False)])
def test_a_switch_takes_on_and_off_words(raw: str, value: bool) -> None:
    p = switch_parser()
    env_defaults(p, "DEMO_", {"DEMO_REINITIALIZE": raw})
    assert p.parse_args([]).reinitialize is value


def test_a_switch_refuses_other_words(capsys: pytest.CaptureFixture[str]) -> None:
    p = switch_parser()
    with pytest.raises(SystemExit) as exit_info:
        env_defaults(p, "DEMO_", {"DEMO_REINITIALIZE": "maybe"})
    assert exit_info.value.code == 2
    assert "DEMO_REINITIALIZE='maybe': choose from 1, true" in capsys.readouterr().err


def off_switch_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="demo")
    p.add_argument("--no-verify", dest="verify", action="store_false", help="skip the check")
    return p


@pytest.mark.parametrize(("raw", "verify"), [("1", False), ("true", False), ("on", False), ("0", True), ("no", True)])
def test_an_off_switch_variable_does_what_its_flag_does(raw: str, verify: bool) -> None:
    p = off_switch_parser()
    env_defaults(p, "DEMO_", {"DEMO_NO_VERIFY": raw})  # on: as if --no-verify were given
    assert p.parse_args([]).verify is verify
    assert p.parse_args(["--no-verify"]).verify is False  # the command line still wins


def test_an_off_switch_is_described_off_by_default() -> None:
    p = off_switch_parser()
    describe_env(p, "DEMO_")
    assert "skip the check (default: off; env: DEMO_NO_VERIFY, 1 or 0)" in " ".join(p.format_help().split())


@pytest.mark.parametrize(
    ("module", "prefix"),
    [
        (node.server.config, "CHAIN_NODE_"),
        (gateway.config, "CHAIN_GATEWAY_"),
        (chain_operator.config, "CHAIN_OPERATOR_"),
    ],
)
def test_every_switch_of_the_commands_reads_its_variable_as_its_flag(module: ModuleType, prefix: str) -> None:
    """chain-node, chain-gateway, chain-operator: `VAR=1` parses as the flag given, `VAR=0` as not given."""
    build = module._parser
    assert prefix == module.ENV_PREFIX
    for action in (a for a in env_actions(build()) if is_switch(a)):
        for raw, argv in (("1", [action.option_strings[0]]), ("0", [])):
            from_env = build()
            env_defaults(from_env, prefix, {env_name(prefix, action): raw})
            expected = getattr(build().parse_args(argv), action.dest)
            assert getattr(from_env.parse_args([]), action.dest) == expected, (env_name(prefix, action), raw)


def described(env: dict[str, str] | None = None) -> str:
    p = parser()
    p.add_argument("--prefix", default="/chain-node/", help="key prefix")
    p.add_argument("--share", default="50%", help="a share")
    p.add_argument("--snapshots", default=None, help="where snapshots go")
    p.add_argument("--reinitialize", action="store_true", help="start over")
    describe_env(p, "DEMO_", lists={"origins"}, shown={"snapshots": "DATA_DIR/snapshots"})
    env_defaults(p, "DEMO_", env or {}, lists={"origins"})
    return p.format_help()


def test_help_names_each_flags_default_and_variable() -> None:
    text = " ".join(described().split())
    assert "--listen-addr LISTEN_ADDR (default: localhost:1; env: DEMO_LISTEN_ADDR)" in text
    assert "--interval INTERVAL (default: 1.0; env: DEMO_INTERVAL)" in text  # a flag without help gets one
    assert "(default: solo; env: DEMO_MODE)" in text
    assert "(default: none; env: DEMO_ORIGIN, comma-separated)" in text
    assert "key prefix (default: /chain-node/; env: DEMO_PREFIX)" in text
    assert "a share (default: 50%; env: DEMO_SHARE)" in text  # '%' is not taken for a format
    assert "where snapshots go (default: DATA_DIR/snapshots; env: DEMO_SNAPSHOTS)" in text
    assert "start over (default: off; env: DEMO_REINITIALIZE, 1 or 0)" in text
    assert "Every flag can also be set by the environment variable named in its help (DEMO_...)" in text
    assert "DEMO_HELP" not in text


def test_help_shows_the_built_in_default_not_the_environments() -> None:
    assert "(default: 1.0; env: DEMO_INTERVAL)" in " ".join(described({"DEMO_INTERVAL": "7"}).split())


def test_help_lines_never_break_inside_a_value(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "40")  # narrow: every help text wraps
    lines = described().splitlines()
    words = {word for line in lines for word in line.split()}
    assert {"/chain-node/;", "comma-separated)", "DATA_DIR/snapshots;", "DEMO_REINITIALIZE,"} <= words, lines
    assert not [line for line in lines if line.endswith("-")]


def test_version_prints_the_package_version_and_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    p = parser()
    add_version(p)
    with pytest.raises(SystemExit) as exit_info:
        p.parse_args(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out == f"demo {metadata.version('chain-node')}\n"
