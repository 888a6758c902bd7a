"""Flags from the environment: names, conversion, lists, and a usage error (not a traceback) for bad values."""

from __future__ import annotations

import argparse

import pytest

from node.envflags import env_defaults


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
