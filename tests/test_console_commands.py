"""The server-side console commands explain themselves: `--version` prints the package version and exits 0;
`--help` names, for every flag, its default and its environment variable, and has no RST markup.

Each command runs as the installed console script. The expected help is derived from the command's own
parser and configuration dataclass, so a flag added without a help text, a default or a variable fails here.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

from chain_operator import config as operator_config
from gateway import config as gateway_config
from node.envflags import default_text, env_actions, env_name, is_switch
from node.server import config as node_config

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Command:
    name: str
    parser: Callable[[], argparse.ArgumentParser]
    prefix: str
    config: Any  # the frozen configuration dataclass the flags fill
    shown: dict[str, str]


COMMANDS = [
    Command(
        "chain-node",
        node_config._parser,
        node_config.ENV_PREFIX,
        node_config.NodeConfig(),
        dict(node_config.SHOWN_DEFAULTS),
    ),
    Command("chain-gateway", gateway_config._parser, gateway_config.ENV_PREFIX, gateway_config.GatewayConfig(), {}),
    Command(
        "chain-operator", operator_config._parser, operator_config.ENV_PREFIX, operator_config.OperatorConfig(), {}
    ),
]
IDS = [c.name for c in COMMANDS]


def run(command: str, *args: str, columns: int = 80) -> subprocess.CompletedProcess[str]:
    script = Path(sys.executable).parent / command
    env = dict(os.environ, COLUMNS=str(columns), PYTHONPATH=str(ROOT))
    return subprocess.run(
        [str(script), *args], check=False, capture_output=True, text=True, timeout=120, env=env, cwd=ROOT
    )


@pytest.mark.parametrize("command", COMMANDS, ids=IDS)
def test_version_prints_the_package_version(command: Command) -> None:
    done = run(command.name, "--version")
    assert (done.returncode, done.stdout, done.stderr) == (0, f"{command.name} {metadata.version('chain-node')}\n", "")


def expected_notes(command: Command) -> dict[str, str]:
    """Per flag: the `(default: X; env: NAME` its help must show; X from the configuration dataclass (or, for a
    flag folded into another field while parsing, such as --cluster-secret-file, and a choice such as on/off
    parsed into a bool, the flag's own default)."""
    notes = {}
    for action in env_actions(command.parser()):
        configured = getattr(command.config, action.dest, action.default)
        if action.choices is not None:  # a choice (on/off) parsed into another type: the help shows the choice
            configured = action.default
        default = command.shown.get(action.dest) or default_text(configured, switch=is_switch(action))
        notes[action.option_strings[0]] = f"(default: {default}; env: {env_name(command.prefix, action)}"
    return notes


@pytest.mark.parametrize("command", COMMANDS, ids=IDS)
def test_help_names_every_flags_default_and_variable(command: Command) -> None:
    done = run(command.name, "--help", columns=60)  # narrow: every help text wraps
    assert (done.returncode, done.stderr) == (0, "")
    text = " ".join(done.stdout.split())
    notes = expected_notes(command)
    assert len(notes) >= 8
    missing = {flag: note for flag, note in notes.items() if note not in text}
    assert missing == {}
    assert "--version print the version and exit" in text
    assert "``" not in done.stdout


@pytest.mark.parametrize("command", COMMANDS, ids=IDS)
def test_every_flag_has_a_help_text_of_its_own(command: Command) -> None:
    bare = [a.option_strings[0] for a in env_actions(command.parser()) if (a.help or "").startswith("(default:")]
    assert bare == []


@pytest.mark.parametrize("command", COMMANDS, ids=IDS)
def test_no_rst_markup_in_the_parser(command: Command) -> None:
    p = command.parser()
    texts = [p.description or "", p.epilog or ""] + [a.help or "" for a in p._actions]
    assert [t for t in texts if "``" in t] == []
